"""What the parent asks of a worker (``kind`` names each on the wire); a side answers by its type."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from forge.core.statuses import TimingRegime
from forge.verifier.protocol.records import Message, ModelBuild, Tensors


class SetupRequest(Message):
    """Reference: plan a verification of the op with this seed (``ProblemReply``)."""

    kind: Literal["setup"] = "setup"
    op_path: str
    seed: int
    timing_budget_s: float = 1.0
    timing_trials: int | None = None
    timing_batch_mb: int = 160
    cache_dir: str
    instance: str | None = None  # a carved op's other instance to build (``FORGE_INSTANCE``)


class CaseDataRequest(Message):
    """Reference: draw one case, with its refill partner's (``CaseDataReply``)."""

    kind: Literal["case_data"] = "case_data"
    id: str
    partner: str | None = None


class RooflineRequest(Message):
    kind: Literal["roofline"] = "roofline"
    cache_dir: str


class TimingBatchRequest(Message):
    """Reference: draw the next batch of timing inputs (``TimingBatchReply``)."""

    kind: Literal["timing_batch"] = "timing_batch"
    index: int = Field(ge=0)
    train_step: bool = False  # expected: a training step's outputs and gradients (``gradients.training_step``)


class BaselinesBeginRequest(Message):
    kind: Literal["baselines_begin"] = "baselines_begin"
    compile: bool
    warm: bool
    train_step: bool = False  # time training steps (``gradients.training_step``), not forward calls


class BaselineCallRequest(Message):
    kind: Literal["baseline_call"] = "baseline_call"
    index: int = Field(ge=0)


class BaselinesEndRequest(Message):
    kind: Literal["baselines_end"] = "baselines_end"


class LoadRequest(Message):
    """Candidate: import the op and the candidate file (``LoadedReply``)."""

    kind: Literal["load"] = "load"
    op_path: str
    candidate_path: str


class InstantiateRequest(Message):
    kind: Literal["instantiate"] = "instantiate"
    models: list[ModelBuild]


class CaseRequest(Message):
    """Candidate: run one case on ``model`` (``CaseResultReply``); ``refill``: the partner's
    inputs, written into the same buffers for a third call."""

    kind: Literal["case"] = "case"
    id: str
    model: str
    inputs: Tensors
    refill: Tensors | None = None
    state_before: dict[str, Any] | None = None


class BindRequest(Message):
    """Candidate: bind ModelNew to an instance of the user's class (``BoundReply``)."""

    kind: Literal["bind"] = "bind"
    model: ModelBuild


class TimeBeginRequest(Message):
    """Candidate: prepare a batch of timed calls. ``sets`` None: the batch it holds (warm calls)."""

    kind: Literal["time_begin"] = "time_begin"
    model: str
    sets: list[Tensors] | None
    warmup: list[Tensors] | None
    warm: bool
    memory_budget: int | None
    train_step: bool = False  # as BaselinesBeginRequest's


class TimeCallRequest(Message):
    kind: Literal["time_call"] = "time_call"
    index: int = Field(ge=0)


class TimeEndRequest(Message):
    kind: Literal["time_end"] = "time_end"


class ProfileRequest(Message):
    """Candidate: its calls on the first timing set under torch.profiler (``ProfileReply``)."""

    kind: Literal["profile"] = "profile"
    calls: int = Field(ge=1)
    call_ms: float | None = None  # its timed median in the judged regime: what the rows' shares are of


class Turns(Message):
    """A user-loop process that takes turns with another (``timing.user_loop_turns``): it reads a byte
    from ``read_fd`` before each block of ``block_rounds`` rounds and writes one to ``write_fd``
    after it, ``blocks`` times; eager's calls go to ``times_path`` (``TurnTimes``). The control
    process never imports the candidate."""

    role: Literal["loaded", "control"]
    read_fd: int
    write_fd: int
    blocks: int = Field(ge=1)
    block_rounds: int = Field(ge=1)
    times_path: str


class TurnTimes(Message):
    """Eager's per-call nanoseconds in one process's turns, or why there are none."""

    eager_ns: list[int] = Field(default_factory=list)
    failed: str | None = None


class UserLoopRequest(Message):
    """A user-loop process's job (``timing.user_loop``), written to the file it reads; it answers with a
    ``UserLoop`` record written to another (a control process, ``turns.role == "control"``, with
    its ``TurnTimes`` alone)."""

    op_path: str
    candidate_path: str
    regime: TimingRegime
    rounds: int = Field(ge=1)
    compile: bool
    seed: int
    device: str
    turns: Turns | None = None


class GradDataRequest(Message):
    """Reference: one gradient case on ``model`` (``GradDataReply``): inputs drawn with ``seed``,
    the gradients flowing into its outputs, and what its autograd makes of them."""

    kind: Literal["grad_data"] = "grad_data"
    model: str
    seed: int
    inputs: str = "normal"  # "normal" or a stress kind (``cases.STRESS_KINDS``) the inputs are drawn from
    second_order: bool = False  # also a create_graph=True backward (``GradDataReply.second_order``)


class GradRunRequest(Message):
    """Candidate: a forward and a backward on ``model`` (``GradRunReply``): ``inputs`` (floating
    ones requiring grad) and ``grad_outputs`` flowing into its outputs."""

    kind: Literal["grad_run"] = "grad_run"
    model: str
    inputs: Tensors
    grad_outputs: Tensors
    second_order: bool = False  # also a create_graph=True backward (``GradRunReply.second_order``)


class ExitRequest(Message):
    kind: Literal["exit"] = "exit"


Request = Annotated[
    SetupRequest
    | CaseDataRequest
    | RooflineRequest
    | TimingBatchRequest
    | BaselinesBeginRequest
    | BaselineCallRequest
    | BaselinesEndRequest
    | LoadRequest
    | InstantiateRequest
    | CaseRequest
    | BindRequest
    | TimeBeginRequest
    | TimeCallRequest
    | TimeEndRequest
    | ProfileRequest
    | GradDataRequest
    | GradRunRequest
    | ExitRequest,
    Field(discriminator="kind"),
]
REQUESTS: TypeAdapter[Request] = TypeAdapter(Request)
