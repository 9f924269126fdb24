"""The two agent roles and the values they exchange (implementations: LLM and built-in).

A ``Coder`` proposes candidate sources from a ``CoderContext``; a ``Judge`` reviews a verdict with
the history and returns ``JudgeFeedback``. The judge's answer crosses a trust boundary (it may come
from an LLM), so it is a pydantic model and is validated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field


@dataclass
class HistoryItem:
    """One earlier attempt as the agents see it."""

    round: int
    source: str
    status: str
    reason: str | None = None
    failing_check: str | None = None
    error_text: str | None = None
    max_abs_error: float | None = None
    timings_ms: dict[str, float | None] = field(default_factory=dict)
    roofline_fraction: float | None = None
    feedback: JudgeFeedback | None = None
    config: dict[str, Any] | None = None  # the launch/parallel config the candidate was built with
    parent_config: dict[str, Any] | None = None  # its parent's config (the tuner attributes failures)
    attempt_id: int | None = None
    speedup_vs_eager: float | None = None


@dataclass
class CoderContext:
    op_name: str
    op_source: str
    device: str
    backend: str  # "cpp", "triton" or "cuda"
    device_spec: dict[str, Any] = field(default_factory=dict)
    history: list[HistoryItem] = field(default_factory=list)
    want: int = 1  # how many candidates to propose (evolve asks for several)
    parent: HistoryItem | None = None  # the attempt to improve on (None: start from scratch)


@dataclass
class Proposal:
    """A candidate the coder proposes; ``error`` set when the reply held no usable candidate."""

    source: str | None
    backend: str
    prompt: str | None = None
    response: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    parent_config: dict[str, Any] | None = None  # the config this one varies (the tuner's bookkeeping)
    kernel_config: dict[str, Any] | None = None  # config less knobs inert in this kernel: what is banked
    note: str = ""
    error: str | None = None
    fatal: bool = False  # the coder cannot handle this op at all: stop the session
    tokens: int = 0
    cost_usd: float | None = None
    cost_known: bool = True


class JudgeFeedback(BaseModel):
    """What the judge returns: validated, because it may come from an LLM."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    diagnosis: str = Field(default="", description="why a failing candidate failed")
    bottleneck: str = Field(default="", description="the main bottleneck of a passing candidate")
    next_step: str = Field(default="", description="one concrete next step")
    continue_search: bool = Field(default=True, alias="continue")
    config: dict[str, Any] = Field(default_factory=dict, description="launch/parallel config to try next")


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
    def review(self, context: CoderContext, verdict: dict[str, Any]) -> Review: ...
