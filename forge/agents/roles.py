"""The two agent roles and the values they exchange (implementations: LLM and built-in).

A ``Coder`` proposes candidate sources from a ``CoderContext``; a ``Judge`` reviews a verdict with
the history and returns a ``Review`` holding its ``JudgeFeedback`` (validated: it may come from an
LLM).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from forge.core.candidate_config import CandidateConfig
from forge.core.feedback import JudgeFeedback
from forge.core.figures import AttemptFigures
from forge.core.op_brief import CandidateProfile, OpBrief
from forge.core.round_match import RoundMatch
from forge.core.statuses import AttemptStatus
from forge.core.timing_records import Timings
from forge.core.verdict import Verdict


@dataclass(frozen=True)
class MachineFacts:
    """What the coder's prompt says about the machine: the device, its measured bandwidth and
    matmul peak, and the CPU's model, cores, ISA extensions and caches, or the GPU's name, SMs,
    memory and compute capability."""

    device: str
    device_name: str | None = None
    bandwidth_gbs: float | None = None
    peak_gflops: float | None = None
    # set when the figures above were measured under load: when and how loaded, and that they are provisional
    figures_provisional: str | None = None
    cpu_model: str | None = None
    cores: int | None = None
    topology: str | None = None  # the cores as physical cores and SMT siblings (``machine.cpu_topology``)
    isa: list[str] | None = None
    caches: dict[str, int] | None = None
    gpu: str | None = None
    sms: int | None = None
    memory_gb: float | None = None
    capability: str | None = None

    def items(self) -> list[tuple[str, Any]]:
        """The facts that are known, in this order (the prompt lists them)."""
        return [(f.name, getattr(self, f.name)) for f in fields(self) if getattr(self, f.name) is not None]


@dataclass(frozen=True)
class Confirmation:
    """A finalist's confirmation as a later round sees it (a resumed session): timed again alone
    with more calls (and in a user's loop where that ran), whether it held, and the kernel the
    bank keeps from it. Without it a round was told a finalist was timed again, never the figure."""

    held: bool
    trials: int | None  # calls a side
    figures: AttemptFigures | None  # the confirmation's own measurement (None: not timed)
    user_loop: str | None  # the user loop's figures in words (None: it did not run)
    reason: str | None  # why it held or did not
    kernel_id: int | None  # the kernel banked from this attempt (None: none)


@dataclass
class HistoryItem:
    """One earlier attempt as the agents see it."""

    round: int
    source: str
    status: AttemptStatus
    reason: str | None = None
    failing_check: str | None = None
    error_text: str | None = None
    max_abs_error: float | None = None
    timings_ms: Timings = field(default_factory=Timings)
    roofline_fraction: float | None = None
    feedback: JudgeFeedback | None = None
    config: dict[str, Any] | None = None  # the launch/parallel config the candidate was built with
    parent_config: dict[str, Any] | None = None  # its parent's config (the tuner attributes failures)
    attempt_id: int | None = None
    speedup_vs_eager: float | None = None  # None when not timed (failed, or timed on a busy machine)
    figures: AttemptFigures | None = None  # its speed as the prompts show it (None: not verified)
    training: str | None = None  # a training session: whether it would be used under autograd, and why
    profile: CandidateProfile | None = None  # where its time went (a passing, timed attempt, profiled)
    confirmation: Confirmation | None = None  # a finalist's: its confirmation (a resumed session's history)
    matched: RoundMatch | None = None  # its round's candidates timed together (on the one the round chose)


@dataclass
class CoderContext:
    op_name: str
    op_source: str
    device: str
    backend: str  # "cpp", "triton" or "cuda"
    machine: MachineFacts | None = None  # None: only the device is known (the built-in coder needs no more)
    history: list[HistoryItem] = field(default_factory=list)
    want: int = 1  # how many candidates to propose (evolve asks for several)
    best_of: int = 1  # an LLM coder: how many candidates one reply may hold (``--best-of``)
    parent: HistoryItem | None = None  # the attempt to improve on (None: start from scratch)
    # Told (role, the reply so far) while an LLM's reply streams in; None: replies are not streamed.
    on_reply: Callable[[str, str], None] | None = None
    brief: OpBrief | None = None  # what the op must match and beat (LLM sessions on this machine)
    round: int = 0  # the search's round now, and its last (0: not known)
    rounds: int = 0
    train: bool = False  # kernels for training: the candidate must provide its backward (``--train``)


@dataclass
class Proposal:
    """A candidate the coder proposes; ``error`` set when the reply held no usable candidate."""

    source: str | None
    backend: str
    prompt: str | None = None
    response: str | None = None
    # the configs it was built with (the tuner's, the one it varies, what is banked; whether it is
    # the compiler's own code for the op), as its attempt records them
    configs: CandidateConfig = field(default_factory=CandidateConfig)
    note: str = ""
    error: str | None = None
    fatal: bool = False  # the coder cannot handle this op at all: stop the session
    tokens: int = 0
    cost_usd: float | None = None
    cost_known: bool = True


@dataclass
class Review:
    """One judge call: its feedback (None when the judge gave no usable answer) and what it cost."""

    feedback: JudgeFeedback | None
    prompt: str | None = None
    response: str | None = None
    error: str | None = None
    tokens: int = 0
    cost_usd: float | None = None
    cost_known: bool = True


class Coder(Protocol):
    def propose(self, context: CoderContext) -> list[Proposal]: ...


class Judge(Protocol):
    # whether a review is a model call that costs tokens: a session skips those whose advice no
    # later round would read (its last round's)
    costs_tokens: bool

    def review(self, context: CoderContext, verdict: Verdict) -> Review: ...
