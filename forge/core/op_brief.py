"""What an LLM session's coder and judge are told about the op before they write a line: what it
must match (the tolerances and the checks), what it competes with (where eager's time goes, what
torch.compile generated and how fast that runs) and the runtime facts a kernel depends on.
Measured once per op and machine by ``forge.verifier.briefing.measure`` in a process of its own, read back
here (it crosses a process boundary as JSON: validated)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from forge.core.roofline_record import Roofline
from forge.core.timing_records import PairedRatio

_LENIENT = ConfigDict(extra="ignore")


class ProfiledOp(BaseModel):
    """One row of eager's profile: an aten op (a CUDA kernel on a GPU) and its own time."""

    model_config = _LENIENT
    name: str
    self_ms: float  # per call of the op's forward
    share: float  # of the profiled self time
    calls: float  # per forward
    library: bool = False  # a vendor library's routine (BLAS, oneDNN, cuBLAS, cuDNN)
    launch: str | None = None  # a GPU kernel's grid, block, registers, shared memory and estimated occupancy


class EagerProfile(BaseModel):
    model_config = _LENIENT
    median_ms: float  # one forward, timed without the profiler (its median over the calls)
    calls: int
    ops: list[ProfiledOp] = Field(default_factory=list)  # the top ones, by self time
    clock: str = "cpu"  # whose time the rows are: "cpu" (host) or "cuda" (device)
    # the regime its time was taken in, as the verdicts take theirs (None: a brief from before)
    regime: str | None = None


class CandidateProfile(BaseModel):
    """Where a passing candidate's time goes (``ForgeSettings.profile_candidate``): its calls under
    torch.profiler after its timing, each row's share of a profiled call scaled to its timed median.
    Rows: the C functions it calls through ``forge.cpp`` (``forge.cpp NAME``), ranges it marks itself
    (``torch.profiler.record_function``), the aten ops it runs; on a GPU, its kernels' device time."""

    model_config = _LENIENT
    calls: int  # profiled
    ops: list[ProfiledOp] = Field(default_factory=list)  # the top ones, by own time
    other_share: float = 0.0  # of a profiled call's time in no row: Python, and native code nothing names
    clock: str = "cpu"  # "cpu" (host time) or "cuda" (device time)


class CompiledBaseline(BaseModel):
    """torch.compile of the reference (Inductor's default mode) on the op's own inputs."""

    model_config = _LENIENT
    speedup_vs_eager: float  # eager_ms / compiled_ms
    pairs: int  # calls a side, alternating
    eager_ms: float  # medians over those calls
    compiled_ms: float
    code: str  # Inductor's output code, trimmed to its kernels and its call()
    code_chars: int  # the untrimmed length


class ImportedClass(BaseModel):
    """The user's class an op file imports as ``Model`` (a layer carved out of a model): its
    source and its module's helpers that it calls (``core.class_source``)."""

    model_config = _LENIENT
    name: str  # module:qualname
    source: str
    cut: bool = False  # cut at core.class_source.SOURCE_LIMIT characters


class CaseSlack(BaseModel):
    """The slack one output got in one kind of case on a draw like the verifier's (its
    ``compare.Slack``), beside the reference's own error from its float64 run: the two figures a
    coder weighs a summation order, an accumulator or an exp of its own against."""

    model_config = _LENIENT
    case: str  # normal, or a stress kind (verifier.cases.STRESS_KINDS)
    atol: float  # after the stress case's magnitude scaling
    rtol: float
    reduction_atol: float | None = None  # the widened atol where the output reduces (None: it does not)
    per_element: int = 1
    own_largest: float | None = None  # the reference's own error from float64 (None: no float64 run)
    own_rms: float | None = None
    beside_exact: bool = False  # a value outside the atol is judged again against the float64 run
    tiny: bool = False  # the output's largest value is under TINY_OUTPUT_ATOLS x atol: judged at its own scale too
    # the NaN and inf case: what the reference made of its non-finite inputs (None: another case)
    nonfinite: NonFinite | None = None


class NonFinite(BaseModel):
    """How NaN and inf went through the reference on the stress case that plants them: how many
    input elements were non-finite, and how many of the output's elements came out NaN, +inf or
    -inf (a row-wise op turns one NaN into a row of them; an attention's masked 0 x inf, into
    more). A candidate must put them where the reference does."""

    model_config = _LENIENT
    inputs: int
    nan: int
    pos_inf: int
    neg_inf: int
    elements: int  # of the output


class OutputTolerance(BaseModel):
    model_config = _LENIENT
    output: int
    dtype: str
    shape: list[int]
    atol: float
    rtol: float
    cases: list[CaseSlack] = Field(default_factory=list)


class PairedBaseline(BaseModel):
    """Eager's (and torch.compile's) time a call as every verdict measures it: the reference
    verified against itself (the null control) when the brief is measured, its calls alternating
    with the same reference in another worker, in the regime the verdicts judge. In one process
    with no other side's calls between, eager read 0.62-0.69x the pairs' figure on a cold
    LayerNorm (2-core VM): the brief's ``eager`` and ``compiled`` carry this figure, and
    ``alone_ms`` keeps the other."""

    model_config = _LENIENT
    regime: str  # "cold" or "warm": the judged regime
    pairs: int
    eager_ms: float
    compiled_ms: float | None = None
    alone_ms: float | None = None  # eager in the brief's own process (``EagerProfile`` as measured)
    null: PairedRatio | None = None  # the reference in one worker over the same in another


class OpBrief(BaseModel):
    """The brief; a part that could not be measured is None and its reason is in ``missing``."""

    model_config = _LENIENT
    device: str
    tolerances: list[OutputTolerance] = Field(default_factory=list)
    tolerance_override: bool = False  # the op file sets FORGE_TOLERANCE
    shape_variants: list[str] = Field(default_factory=list)  # besides the op's own shapes
    weights: int | None = None  # floating parameter elements (None: not measured): a second init perturbs them
    buffers: list[str] = Field(default_factory=list)  # floating state_dict buffers: loaded as built, not perturbed
    integer_inputs: list[int] = Field(default_factory=list)  # indices of inputs that are not floating (targets, ids)
    eager: EagerProfile | None = None
    compiled: CompiledBaseline | None = None
    paired: PairedBaseline | None = None  # where eager's and compile's figures above come from the pairs
    roofline: Roofline | None = None  # the op's bytes and FLOPs against this machine's figures, eager's fraction
    # warm when one call's data fits in half the last-level cache (the verifier judges that regime,
    # where data comes from cache and the DRAM roofline bounds nothing), cold otherwise
    regime: str | None = None
    runtime: list[str] = Field(default_factory=list)  # threads, OpenMP runtime, allocator, GPU facts
    missing: list[str] = Field(default_factory=list)  # what could not be measured, and why
    imported: ImportedClass | None = None  # the class the op file imports as Model, where it imports one
