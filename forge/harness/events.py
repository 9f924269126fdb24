"""What the engine reports while it works. The engine never prints: a front end passes an ``Emit``
and renders what arrives (``forge optimize`` prints progress lines on stderr; the TUI will post
them as messages). Every event names its op and session; ``to_dict`` gives it as JSON-ready data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from pydantic import BaseModel

from forge.core.statuses import AttemptStatus, SessionStatus, VerdictStatus
from forge.core.timing_records import Timings


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


@dataclass
class Event:
    problem: str
    session_id: int

    def to_dict(self) -> dict[str, Any]:
        return {"event": type(self).__name__, **{f.name: _plain(getattr(self, f.name)) for f in fields(self)}}


@dataclass
class SessionStarted(Event):
    strategy: str
    agent: str
    model: str | None
    device: str
    backend: str
    resumed: bool = False
    share_s: float | None = None  # this op's share of the run's --time-limit (None: no limit)
    share_usd: float | None = None  # and of its --budget-usd
    shared_among: int = 1  # the ops not yet done it was shared among, itself included
    node: str | None = None  # the cluster node its verifications run on (None: this machine)


@dataclass
class ModelStage(Event):
    """A model-level run's progress (``forge optimize MODEL --modules``): problem is the model,
    session 0; stage is profiled, chosen, carved, instance (one instance checked), instances (an
    op's kernel checked on all of them), proving or proven."""

    stage: str
    detail: str


@dataclass
class ClusterJoined(Event):
    """``--executor ray``: the cluster the run's sessions are spread over (problem "", session 0)."""

    address: str
    nodes: int
    device: str
    cpus_per_session: int
    gpus_per_session: int
    sessions_at_once: int


@dataclass
class SessionSkipped(Event):
    """``--resume all`` left a session cut short alone: another driver runs it, or it is not a
    kernel session."""

    reason: str


@dataclass
class RoundStarted(Event):
    round: int
    rounds: int


@dataclass
class CandidateProposed(Event):
    round: int
    attempt_id: int
    note: str = ""
    error: str | None = None  # the reply held no usable candidate (recorded as such)


@dataclass
class ReplyProgress(Event):
    """An LLM's reply so far, while it streams in (only when the run asked for ``stream_replies``)."""

    round: int
    role: str  # "coder" or "judge"
    text: str


@dataclass
class VerdictReady(Event):
    round: int
    attempt_id: int
    status: VerdictStatus
    reason: str | None
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    timings_ms: Timings = field(default_factory=Timings)
    busy: str | None = None  # timed while the machine was busy: the load, and no speedup is known


@dataclass
class MachineBusy(Event):
    """The last verification was timed while other processes loaded the machine: the session
    waits (up to ``limit_s``) for the load to go before it verifies the next candidate or
    finalist (``waited_s`` None), then says how that went: quiet, it goes on; still busy, it ends
    ``busy`` (``forge optimize --resume`` continues it)."""

    round: int
    detail: str  # the load the OS reported
    limit_s: float
    waited_s: float | None = None
    quiet: bool | None = None  # None while waiting


@dataclass
class JudgeReviewed(Event):
    """The judge's feedback on an attempt (``error``: it gave no usable answer; the session goes on)."""

    round: int
    attempt_id: int
    diagnosis: str
    bottleneck: str
    next_step: str
    continue_search: bool
    error: str | None = None


@dataclass
class RoundMatched(Event):
    """A round's passing candidates timed together in one verification (``time_together``):
    ``chosen`` goes on (None: the match decided nothing, ``summary`` says why)."""

    round: int
    attempts: list[int]
    chosen: int | None
    decisive: bool
    summary: str


@dataclass
class ConfirmStarted(Event):
    """The session times a finalist again, alone, before banking it."""

    attempt_id: int
    trials: int


@dataclass
class ConfirmFinished(Event):
    attempt_id: int
    confirm_id: int  # the confirmation's own row (role "confirm", parent = the attempt)
    held: bool  # beat eager beyond the noise again
    reason: str
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None


@dataclass
class NullControlStarted(Event):
    """The session times the op's reference against itself, in a clean worker, before banking a
    finalist (``trials`` calls a side, as many as the finalist's confirmation)."""

    trials: int


@dataclass
class NullControlFinished(Event):
    """The null control's paired ratio and the speedup a finalist's interval must clear (None
    when it sets no bar: ``note`` says why, the machine's load or its failure)."""

    trials: int
    median: float | None
    low: float | None
    high: float | None
    bar: float | None
    note: str = ""


@dataclass
class KernelAccepted(Event):
    kernel_id: int
    attempt_id: int
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    eager_only: bool = False  # not used under torch.compile (``acceptance.beats_compile``)
    compile_why: str = ""


@dataclass
class PlanChecked(Event):
    """A parallel plan through the ladder: refused (static rules, memory), predicted only
    (``--simulate``), or run for real (passed, or failed with its reason)."""

    round: int
    attempt_id: int
    mesh: str
    note: str
    status: AttemptStatus
    reason: str
    predicted_ms: float | None  # the cost model's step (calibrated when the session had runs)
    measured_ms: float | None  # the real run's step: the slowest rank's median
    memory_mb: float | None  # predicted per device


@dataclass
class PlanBanked(Event):
    plan_id: int
    attempt_id: int | None
    mesh: str
    measured_ms: float | None
    predicted_ms: float | None
    simulated: bool = False  # ranked by the cost model alone: not measured


@dataclass
class CostUpdated(Event):
    tokens: int  # the run's totals so far (every session of it)
    cost_usd: float | None  # None: some call's price is unknown


@dataclass
class SessionFinished(Event):
    status: SessionStatus
    accepted: bool
    kernel_id: int | None
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    attempts: int
    reason: str | None


Emit = Callable[[Event], None]


def ignore(_event: Event) -> None:
    """An ``Emit`` that drops everything."""
