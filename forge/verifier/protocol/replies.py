"""What a worker answers; the parent parses every frame into one of these (``parse_reply``)."""

from __future__ import annotations

from collections.abc import Sized
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, model_validator

from forge.core.op_brief import CandidateProfile
from forge.core.roofline_record import Roofline
from forge.verifier.protocol.records import (
    BoundPlan,
    CaseDescriptor,
    CaseFacts,
    Message,
    ModelBuild,
    PartnerCase,
    Tensors,
    TimingFacts,
    TimingPlan,
)

Nanoseconds = Annotated[int, Field(ge=0)]


class HelloReply(Message):
    """A worker started: its process and device, or why it could not (``error``)."""

    kind: Literal["hello"] = "hello"
    pid: int | None = None
    device: str | None = None
    capability: str | None = None  # CUDA compute capability, "9.0"
    error: str | None = None


class ErrorReply(Message):
    """A request failed in the worker; ``stage`` names where (load, interface, run, memory, ...)."""

    kind: Literal["error"] = "error"
    stage: str
    message: str


class ProblemErrorReply(Message):
    """The op itself is broken (the reference raised on its own inputs, ...)."""

    kind: Literal["problem_error"] = "problem_error"
    message: str


class TickReply(Message):
    """Sent by the candidate's worker just before and after each timed call (the parent's clock)."""

    kind: Literal["tick"] = "tick"


class ProblemReply(Message):
    """The reference's plan of one verification."""

    kind: Literal["problem"] = "problem"
    name: str
    op_hash: str
    target: str | None
    tolerance: dict[str, float] | None
    models: list[ModelBuild]
    cases: list[CaseDescriptor]
    timing: TimingPlan
    bound: BoundPlan
    notes: list[str]
    modes: list[str]


class CaseDataReply(Message):
    """One case's tensors, drawn now; ``skipped``: why the case was skipped instead."""

    kind: Literal["case_data"] = "case_data"
    id: str
    layout: str = "tensor"  # the structure around the reference's outputs (``module_call.output_layout``)
    inputs: Tensors = Field(default_factory=list)
    expected: Tensors = Field(default_factory=list)
    # a stress case's outputs from the reference run in float64 (None: not a stress case, or the
    # reference does not run in float64): how far the float32 reference itself is from exact
    exact: Tensors | None = None
    # per output, the input elements each of its elements depends on (``reduction_lengths``;
    # empty: not found, elements read over elements written stand for it)
    behind: list[int] = Field(default_factory=list)
    state_before: dict[str, Any] | None = None
    expected_state: dict[str, Any] | None = None
    partner: PartnerCase | None = None
    skipped: str | None = None
    detail: str | None = None


class RooflineReply(Message):
    kind: Literal["roofline"] = "roofline"
    estimate: Roofline


class TimingBatchReply(Message):
    """A batch of fresh timing inputs and their expected outputs (the first with the warm-up)."""

    kind: Literal["timing_batch"] = "timing_batch"
    sets: list[Tensors]
    expected: list[Tensors]
    warmup: list[Tensors] | None = None
    behind: list[int] = Field(default_factory=list)  # as CaseDataReply.behind, for the forward's outputs


class BaselinesReadyReply(Message):
    kind: Literal["baselines_ready"] = "baselines_ready"


class BaselineCallReply(Message):
    kind: Literal["baseline_call"] = "baseline_call"
    eager_ns: Nanoseconds
    eager_launch_ns: Nanoseconds = 0
    compile_ns: Nanoseconds | None = None


class BaselinesEndReply(Message):
    kind: Literal["baselines"] = "baselines"
    compile_error: str | None = None


class LoadedReply(Message):
    kind: Literal["loaded"] = "loaded"


class ReadyReply(Message):
    kind: Literal["ready"] = "ready"


class GradDataReply(Message):
    """A gradient case drawn by the reference: its inputs, the gradients flowing into its outputs,
    its outputs, and the gradients its autograd gives, by name ("input 0", "parameter w.weight")."""

    kind: Literal["grad_data"] = "grad_data"
    model: str
    inputs: Tensors
    grad_outputs: Tensors
    expected: Tensors
    grads: dict[str, Any]
    # a stress case's outputs and gradients in float64 (None: an ordinary case, or the reference
    # does not run in float64), as CaseDataReply.exact
    exact: Tensors | None = None
    exact_grads: dict[str, Any] | None = None
    # asked for: by name, whether each gradient of a create_graph=True backward carries a graph
    # (``gradients.second_order``); None when not asked, or the reference's own backward refuses it
    second_order: dict[str, bool] | None = None


class GradRunReply(Message):
    """The candidate's forward and backward on a gradient case: its outputs, and the gradients by
    the reference's names (None: the input or parameter got no gradient)."""

    kind: Literal["grad_run"] = "grad_run"
    outputs: list[Any]
    grads: dict[str, Any]
    differentiable: bool = True  # any output carried an autograd graph
    reference_calls: int = 0  # calls of the reference's forward during the forward and backward
    # asked for: the candidate's ``gradients.second_order`` (a str: its create_graph=True backward raised)
    second_order: dict[str, bool] | str | None = None
    # asked for with second_order: the candidate's custom ops opcheck ran on, and its first failure
    custom_ops: list[str] = Field(default_factory=list)
    custom_op_failure: str | None = None


class CaseResultReply(Message):
    """The candidate's outputs for one case (first call, second call, call on refilled inputs)."""

    kind: Literal["case_result"] = "case_result"
    id: str
    outputs: list[Any]
    outputs2: list[Any]
    outputs_refill: list[Any] | None = None
    state_after: dict[str, Any] | None = None
    facts: CaseFacts

    @model_validator(mode="after")
    def _facts_per_output(self) -> CaseResultReply:
        # The checks index these lists by output: a reply whose lists disagree is malformed, not
        # a reason for the parent to raise.
        n, f = len(self.outputs), self.facts
        per_output: tuple[tuple[str, Sized], ...] = (
            ("types", f.types),
            ("plain", f.plain),
            ("storage_ok", f.storage_ok),
            ("devices", f.devices),
            ("aliases", f.aliases),
        )
        for name, got in per_output:
            if len(got) != n:
                raise ValueError(f"facts.{name} has {len(got)} entries for {n} outputs")
        return self


class BoundReply(Message):
    kind: Literal["bound"] = "bound"
    mode: str
    reason: str


class TimeReadyReply(Message):
    kind: Literal["time_ready"] = "time_ready"


class TimedCallReply(Message):
    kind: Literal["timed_call"] = "timed_call"
    ns: Nanoseconds


class TimingReply(Message):
    """A batch of timed calls as the candidate's worker measured them, and their outputs."""

    kind: Literal["timing"] = "timing"
    times_ns: list[Nanoseconds]
    host_ns: list[Nanoseconds]
    window_ns: list[Nanoseconds]
    launch_ns: list[Nanoseconds]
    outputs: list[list[Any]]
    facts: TimingFacts

    @model_validator(mode="after")
    def _one_figure_per_call(self) -> TimingReply:
        n = len(self.times_ns)
        if any(len(s) != n for s in (self.host_ns, self.window_ns, self.launch_ns, self.outputs)):
            raise ValueError(f"the timings and outputs of {n} calls differ in length")
        return self


class ProfileReply(Message):
    """Where the candidate's profiled calls spent their time (shares; the parent scales them)."""

    kind: Literal["profile"] = "profile"
    profile: CandidateProfile


Reply = Annotated[
    HelloReply
    | ErrorReply
    | ProblemErrorReply
    | TickReply
    | ProblemReply
    | CaseDataReply
    | RooflineReply
    | TimingBatchReply
    | BaselinesReadyReply
    | BaselineCallReply
    | BaselinesEndReply
    | LoadedReply
    | ReadyReply
    | CaseResultReply
    | GradDataReply
    | GradRunReply
    | BoundReply
    | TimeReadyReply
    | ProfileReply
    | TimedCallReply
    | TimingReply,
    Field(discriminator="kind"),
]
REPLIES: TypeAdapter[Reply] = TypeAdapter(Reply)
