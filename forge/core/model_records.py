"""What a model-level run learns about a model, crossing from its probe process as JSON
(validated here): how the model spends its time per module class and instance (``ModelProfile``),
and what the kernelized model does end to end (``ModelProof``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from forge.core.op_brief import ProfiledOp
from forge.core.timing_records import PairedRatio

_STRICT = ConfigDict(extra="forbid")


class TensorUse(BaseModel):
    """One tensor argument of a module call: its shape and dtype (and, for integers, the range of
    values it held: indices must stay in range when forge draws new ones)."""

    model_config = _STRICT
    shape: list[int]
    dtype: str
    low: int | None = None
    high: int | None = None
    # the same values whatever the model's inputs (a mask, position ids, a rotary table): the op
    # uses the values the model passed (kept beside the op file) instead of drawing new ones
    fixed: bool = False


class CallUse(BaseModel):
    """One way an instance is called: the call's arguments as a template (``x0, mask=None,
    position_embeddings=(x1, x2)``, see ``core.module_call``) and its tensors ``x0``, ``x1``, ..."""

    model_config = _STRICT
    call: str
    tensors: list[TensorUse]


class InitCall(BaseModel):
    """The constructor arguments an instance was built with, as literals an op file can hold
    (``refusal``: why they cannot be written down)."""

    model_config = _STRICT
    args: list[Any] = Field(default_factory=list)  # positional, as Python source (repr) per argument
    # an argument no literal can write (a config object, a layer class, a partial): the op builds
    # the model and takes the arguments the instance was built with (``forge.model_probe.carved``)
    from_model: bool = False
    digest: str | None = None  # then a hash of those arguments' repr (``model_probe.source.init_digest``)
    refusal: str | None = None
    # equal only for instances built from equal literals and the very same objects (a model's one
    # config object): what lets one check stand for several instances (``carve.twins``). A repr
    # hides what an object holds; its identity in the profiled model does not.
    same_build: str = ""


class InstanceUse(BaseModel):
    """One instance of a module class as the model ran it."""

    model_config = _STRICT
    path: str  # its name in the model ("layers.0.norm1")
    calls: int  # per forward of the model
    inclusive_ms: float  # its forwards' time per model forward, children included
    signatures: list[CallUse]  # the distinct ways it was called (arguments, tensor shapes)
    init: InitCall
    config: str  # its configuration (state shapes, plain attributes): what the bank records it verified as
    state: str = ""  # its parameters' and buffers' shapes and dtypes: instances that share one op agree here
    refusal: str | None = None  # why its calls cannot become an op (a KV cache, an object argument, ...)


class ClassUse(BaseModel):
    """A module class: where it is defined, and its instances."""

    model_config = _STRICT
    module: str  # the module it is imported from ("decoder", "torch.nn")
    name: str  # its qualified name
    torch_builtin: bool  # one of torch's own modules
    container: bool  # Sequential, ModuleList, ModuleDict: its parts are the work
    library_share: float  # of its time, the share inside library producers (mm, conv, SDPA)
    share: float  # of the model's time (its instances' inclusive time)
    instances: list[InstanceUse]

    @property
    def key(self) -> str:
        return f"{self.module}:{self.name}"


class ModelProfile(BaseModel):
    """The model as it ran in eager, in inference, on the inputs it is given."""

    model_config = _STRICT
    source: str  # the model file, or module:factory
    import_name: str  # the module its classes are imported from
    model_file: str | None  # a model file, absolute (imported by path under ``import_name``); None: a package's
    root: str  # the model's own class (module:name): not carved out
    device: str
    forward_ms: float  # one forward, median, without hooks or profiler
    forwards: int
    classes: list[ClassUse]
    aten: list[ProfiledOp] = Field(default_factory=list)  # eager's top aten ops, by self time


class FourWay(BaseModel):
    """The four ways of running the model, timed round by round in one process (each round
    calls each way once, the order rotating), in one cache regime."""

    model_config = _STRICT
    regime: str  # "warm" or "cold"
    rounds: int
    eager_ms: float  # medians per forward
    kernelized_ms: float
    compiled_ms: float | None = None
    kernelized_compiled_ms: float | None = None
    kernelized_vs_eager: PairedRatio | None = None  # eager / kernelized, per round
    compiled_vs_eager: PairedRatio | None = None
    kernelized_compiled_vs_eager: PairedRatio | None = None
    kernelized_compiled_vs_compiled: PairedRatio | None = None  # below 1.0x: kernelize slowed compile
    # The nulls: the original against a copy of itself, eager and compiled, in the same rounds:
    # how far two runs of the same model read apart here (``acceptance.null_bar`` of each)
    eager_null: PairedRatio | None = None
    compiled_null: PairedRatio | None = None


class OpCalls(BaseModel):
    """One banked op in the kernelized model: instances patched, and calls in which its kernel ran."""

    model_config = _STRICT
    op: str
    calls: int
    kernel_calls: int


class TrainingProof(BaseModel):
    """The kernelized model in training mode against the original (``--modules --train``): one
    training step each (forward, then the backward of fixed output gradients) compared, outputs
    and every parameter's gradient, then training steps timed round by round, eager and
    kernelized beside a copy of the original (the null); the compiled ways are not timed."""

    model_config = _STRICT
    ops: list[OpCalls]  # calls in the kernelized step: kernel_calls where a training kernel ran
    gradients_match: bool
    max_abs_diff: float | None
    tolerance: str
    detail: str = ""  # the first difference
    timings: list[FourWay] = Field(default_factory=list)

    @classmethod
    def refused(cls, detail: str) -> TrainingProof:
        """A training step that could not be proven (it raised, or the model has nothing to train)."""
        return cls(ops=[], gradients_match=False, max_abs_diff=None, tolerance="", detail=detail)


class ModelProof(BaseModel):
    """A fresh model kernelized with everything banked, against the original."""

    model_config = _STRICT
    kernelized: int  # instances patched
    ops: list[OpCalls]
    outputs_match: bool
    max_abs_diff: float | None
    tolerance: str  # what the outputs were compared with
    detail: str = ""  # the first difference, or why the outputs could not be compared
    timings: list[FourWay] = Field(default_factory=list)
    compile_error: str | None = None  # torch.compile failed: the compiled ways are missing
    warnings: list[str] = Field(default_factory=list)  # what the bank said while kernelizing
    training: TrainingProof | None = None  # --train: the training step's proof
