"""The records messages hold: models to build, case descriptors, the timing plan, a call's facts."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Tensors (and a candidate's outputs, which may be anything) travel as ``Any``: the codec rebuilt
# every tensor it carried, and ``compare`` reports an output that is not one.
Tensors = list[Any]

# The key of the reference worker's model verified in training mode, for an op whose output differs
# by mode (``ReferenceSide``); like every "base" model it has the op's own shapes.
TRAIN_KEY = "base/train"


class Message(BaseModel):
    """A record on the verifier's channel: unknown fields are a protocol breach, not ignored."""

    model_config = ConfigDict(extra="forbid")

    def wire(self) -> dict[str, Any]:
        """What the channel encodes (tensors stay the objects they are)."""
        return self.model_dump()


class ModelBuild(Message):
    """One model for the candidate to build: ``ModelNew(*init_args)``, the reference's weights
    loaded into it, in training mode or not, with the shape variant's constants (``overrides``).
    ``init_args`` None: the arguments are objects no message carries (a config object, a layer
    class); the candidate's worker calls the op file's ``get_init_inputs()`` for them."""

    key: str
    init_args: list[Any] | None
    state_dict: dict[str, Any]
    overrides: dict[str, Any] = Field(default_factory=dict)
    train: bool = False


class InputShape(Message):
    shape: list[int]
    dtype: str


class CaseDescriptor(Message):
    """A correctness case as planned at set-up: its tensors are drawn when the parent asks."""

    id: str
    model: str  # the key of the model it runs on (``ModelBuild.key``)
    kind: str  # "normal" or a stress kind (``cases.STRESS_KINDS``)
    shape: str  # the shape variant, as the verdict names it
    specs: list[InputShape]
    input_bytes: int


class TimingPlan(Message):
    """How the op is timed: the model, the number of batches and the memory they may use."""

    model: str
    batches: int = Field(ge=1)
    working_set_bytes: int
    cache_bytes: int | None
    memory_budget: int | None


class BoundPlan(Message):
    """An instance of the user's class with weights of its own, and the cases run on it bound."""

    model: ModelBuild
    cases: list[CaseDescriptor]


class PartnerCase(Message):
    """The case whose inputs are written into a case's input buffers (the stale-results check)."""

    id: str
    kind: str
    inputs: Tensors
    expected: Tensors
    exact: Tensors | None = None  # as CaseDataReply.exact


class CaseFacts(Message):
    """What the candidate's worker saw around one correctness call (checked by ``checks``)."""

    layout: str  # the structure around what forward returned (``module_call.output_layout``)
    types: list[str]
    plain: list[bool]  # exactly torch.Tensor
    storage_ok: list[bool]
    devices: list[str | None]
    aliases: list[list[int]]  # per output, the inputs it shares memory with
    busy_python_threads: list[str]
    new_native_threads: int
    new_thread_names: list[str] = Field(default_factory=list)  # the kernel's names for them (comm)
    call_index: int
    reference_calls: int  # calls of the reference's forward during the call (a fallback)
    inputs_modified: list[int]
    changed_after_return: list[int]
    clock_tampering: list[str]
    # outputs of this call (kept alive) whose values a later call on other inputs changed: the
    # candidate writes every call's result into one buffer of its own
    overwritten_by_later_call: list[int] = Field(default_factory=list)


class TimingFacts(Message):
    """What the candidate's worker saw around a batch of timed calls."""

    new_native_threads: int = 0
    new_thread_names: list[str] = Field(default_factory=list)
    clock_tampering: list[str] = Field(default_factory=list)
    # the batch's first output, kept alive through the batch, read other values at its end
    first_output_overwritten: bool = False
