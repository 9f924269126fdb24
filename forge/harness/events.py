"""What the engine reports while it works. The engine never prints: front ends render these
(the CLI on stderr or as JSON lines, the TUI as Textual messages)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Event:
    problem: str
    session_id: int

    def to_dict(self) -> dict[str, Any]:
        return {"event": type(self).__name__, **asdict(self)}


@dataclass
class SessionStarted(Event):
    strategy: str
    agent: str
    model: str | None
    device: str
    backend: str
    resumed: bool = False


@dataclass
class RoundStarted(Event):
    round: int
    rounds: int


@dataclass
class CandidateProposed(Event):
    round: int
    attempt_id: int
    note: str = ""
    error: str | None = None


@dataclass
class VerdictReady(Event):
    round: int
    attempt_id: int
    status: str
    reason: str | None
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    timings_ms: dict[str, float | None] = field(default_factory=dict)


@dataclass
class JudgeFeedback(Event):
    round: int
    attempt_id: int
    diagnosis: str
    bottleneck: str
    next_step: str
    continue_search: bool
    error: str | None = None  # the judge gave no usable answer (the session goes on without it)


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
class KernelAccepted(Event):
    kernel_id: int
    attempt_id: int
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None


@dataclass
class CostUpdated(Event):
    tokens: int
    cost_usd: float | None  # None: some call's price is unknown


@dataclass
class SessionFinished(Event):
    status: str  # finished | budget | time_limit | interrupted | unsupported | failed
    accepted: bool
    kernel_id: int | None
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    attempts: int
    reason: str | None


Emit = Callable[[Event], None]


def ignore(_event: Event) -> None:
    """An ``Emit`` that drops everything."""
