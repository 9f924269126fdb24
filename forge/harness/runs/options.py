"""What a front end asks ``optimize`` for, checked before anything runs, and what a session stores
so that ``--resume`` goes on the same way."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter

from forge.agents import AgentChoice
from forge.core.choices import SEARCH_STRATEGIES, Backend, Device, Strategy
from forge.core.errors import UsageError
from forge.core.paths import BankLocation
from forge.core.settings import ForgeSettings

DEFAULT_ROUNDS = 8
TextEnumT = TypeVar("TextEnumT", Backend, Strategy, Device)


@dataclass(frozen=True)
class SessionChoices:
    """What a session keeps of its options (the bank stores them with it, ``StoredOptions``) and a
    resumed session takes back: its agents and its search. ``rounds``: None takes the default (8)."""

    model: str | None = None
    judge_model: str | None = None
    api_base: str | None = None
    strategy: Strategy = Strategy.REFINE
    rounds: int | None = None
    population: int = 4  # evolve: children per generation
    top_k: int = 2  # evolve: parents per generation
    # an LLM coder: candidates one reply may hold, verified in the same round (the round goes on
    # from the fastest that passes, and the judge reviews that one)
    best_of: int = 2
    train: bool = False  # kernels for training: their backward verified too (``session_settings``)

    def __post_init__(self) -> None:
        # a library caller may give plain strings: parsed here once, members from then on
        object.__setattr__(self, "strategy", _member(Strategy, self.strategy, "--strategy"))

    @property
    def agents(self) -> AgentChoice:
        return AgentChoice(self.model, self.judge_model, self.api_base)

    @property
    def round_limit(self) -> int:
        return DEFAULT_ROUNDS if self.rounds is None else self.rounds

    def choices(self) -> dict[str, Any]:
        """This record's ``SessionChoices`` fields alone (of a subclass too), by name."""
        return {f.name: getattr(self, f.name) for f in fields(SessionChoices)}


@dataclass(frozen=True)
class OptimizeOptions(SessionChoices):
    """One ``forge optimize`` run: the session's choices (``SessionChoices``), and this run's
    backend, parallel verifications, bank, limits, or the session to resume.

    ``rounds`` given with ``resume`` replaces the stored count (more than stored continues a
    finished session). ``resume_all``: every session of the bank that was cut short and that no
    live driver runs. ``bank_attempt``: bank one of the resumed session's passed attempts by hand,
    through the same confirmation its own finalists get (it is banked only if it holds up).
    """

    backend: Backend = Backend.AUTO
    workers: int = 1  # verifications run in parallel
    bank: BankLocation | None = None
    budget_usd: float | None = None  # shared by every op of the run
    time_limit_s: float | None = None  # likewise
    resume: int | None = None  # a session id
    resume_more: tuple[int, ...] = ()  # more session ids resumed in the same run (after a driver died)
    resume_all: bool = False  # every session in the bank cut short whose driver is gone (SessionStatus.cut_short)
    bank_attempt: int | None = None  # with resume: confirm this passed attempt and bank it, no search
    stream_replies: bool = False  # LLM replies streamed and reported as they arrive (ReplyProgress events)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "backend", _member(Backend, self.backend, "--backend"))

    def resume_command(self, session_id: int) -> str:
        """The command that continues session ``session_id`` in this run's bank (a server bank's
        password is not printed: fill it in)."""
        bank = f" --bank {shlex.quote(str(self.bank))}" if self.bank is not None else ""
        return f"forge optimize --resume {session_id}{bank}"

    def check(self) -> None:
        """UsageError naming the bad option."""
        if self.strategy not in SEARCH_STRATEGIES:
            raise UsageError(f"--strategy {self.strategy}: choose {' or '.join(SEARCH_STRATEGIES)}")
        for name in ("rounds", "workers", "population", "top_k", "best_of"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1 (got {value})")
        if self.resume_more and self.resume is None:
            raise UsageError("resume_more continues sessions alongside resume=SESSION_ID: set resume first")
        if self.resume_all and self.resume is not None:
            raise UsageError("--resume all continues every session cut short: name no session ids beside it")
        if self.bank_attempt is not None and (self.resume_more or self.resume_all):
            raise UsageError("banking an attempt by hand names one session: leave out the other --resume")
        if self.bank_attempt is not None and self.resume is None:
            raise UsageError("banking an attempt by hand needs its session (resume=SESSION_ID)")


@dataclass(frozen=True)
class StoredOptions(SessionChoices):
    """A session's choices as the bank keeps them (JSON), with its op, device and backend; the
    parallel verifications it ran with (``workers``) are kept to be shown, not taken back."""

    op_path: str = ""
    device: Device | None = None
    backend: Backend | None = None
    workers: int = 1

    @classmethod
    def of(cls, options: OptimizeOptions, op_path: Path, device: Device, backend: Backend) -> StoredOptions:
        kept = options.choices()
        return cls(
            **{**kept, "rounds": options.round_limit},
            op_path=str(op_path),
            device=device,
            backend=backend,
            workers=options.workers,
        )

    @classmethod
    def read(cls, settings: dict[str, Any]) -> StoredOptions:
        """The session row's settings (JSON written by ``to_json``, or by an earlier forge)."""
        return _STORED.validate_python(settings)

    def resumed(self, given: OptimizeOptions) -> OptimizeOptions:
        """``given`` (this run's flags) with the session's own agents and search; a ``rounds``
        given now replaces the stored count."""
        kept = self.choices()
        rounds = self.rounds if given.rounds is None else given.rounds
        return replace(given, **{**kept, "rounds": rounds}, backend=self.backend or given.backend)

    def to_json(self) -> dict[str, Any]:
        stored: dict[str, Any] = _STORED.dump_python(self, mode="json")
        return stored


_STORED: TypeAdapter[StoredOptions] = TypeAdapter(StoredOptions)


def session_settings(settings: ForgeSettings, choices: SessionChoices) -> ForgeSettings:
    """The settings a session verifies with: a training session's verifier checks gradients too,
    and an LLM session's profiles each passing candidate (its agents read where the time goes)."""
    update: dict[str, bool] = {}
    if choices.train and not settings.verify_gradients:
        update["verify_gradients"] = True
    if choices.model and not settings.profile_candidate:
        update["profile_candidate"] = True
    return settings.model_copy(update=update) if update else settings


def resolve_backend(choice: Backend, device: Device) -> Backend:
    """The backend a session writes kernels for: ``auto`` is Triton on CUDA and C++ on a CPU."""
    choice, device = _member(Backend, choice, "--backend"), Device(device)
    if choice is Backend.AUTO:
        return Backend.TRITON if device is Device.CUDA else Backend.CPP
    if choice in (Backend.TRITON, Backend.CUDA) and device is not Device.CUDA:
        why = (
            "Triton runs on CPU only in its interpreter, where timings mean nothing" if choice is Backend.TRITON else ""
        )
        raise UsageError(f"--backend {choice} needs a CUDA device (this run uses cpu). {why}".strip())
    if choice is Backend.CPP and device is not Device.CPU:
        raise UsageError("--backend cpp writes CPU kernels; use --device cpu with it")
    return choice


def _member(kind: type[TextEnumT], value: str, flag: str) -> TextEnumT:
    try:
        return kind(value)
    except ValueError:
        raise UsageError(f"{flag} {value!r}: choose one of {', '.join(kind)}") from None
