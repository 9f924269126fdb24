"""The verdict: what the verifier decided about one candidate, as a typed record.

It is built only in the trusted parent (``forge.verifier``), stored as JSON in the bank (an
attempt's row, a kernel's evidence) and read back into this type wherever it is used. Reading is
lenient about what older forges did not write (a missing field takes its default, an unknown key
is ignored), so banks written before a field existed still load; a value of the wrong type is
refused (``ValueError``).

A session adds the fields of a confirmation (a finalist timed again before it is banked) to the
verdict of that second measurement; they are left out of the JSON of a plain verification.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from forge.core.statuses import BindMode, ModuleMode, TimingRegime, VerdictStatus

_LENIENT = ConfigDict(extra="ignore", populate_by_name=True)


class Check(BaseModel):
    """One named check. A non-fatal check that fails is a warning: it never fails the verdict."""

    model_config = _LENIENT
    name: str
    passed: bool
    detail: str = ""
    fatal: bool = True


class TimingStats(BaseModel):
    """One side's timed calls: median, spread and quartiles in milliseconds."""

    model_config = _LENIENT
    median_ms: float
    mean_ms: float = 0.0
    min_ms: float = 0.0
    max_ms: float = 0.0
    iqr_ms: float = 0.0
    stdev_ms: float = 0.0
    trials: int = 0
    # Lower and upper quartiles (the acceptance rule compares these); 0 in verdicts stored before
    # forge recorded them, where the rule falls back to median -/+ IQR/2.
    q1_ms: float = 0.0
    q3_ms: float = 0.0

    @classmethod
    def from_ns(cls, times_ns: Sequence[float]) -> TimingStats:
        ms = sorted(t / 1e6 for t in times_ns)
        if not ms:
            raise ValueError("no timing trials")
        q = statistics.quantiles(ms, n=4) if len(ms) >= 2 else [ms[0], ms[0], ms[0]]
        return cls(
            median_ms=statistics.median(ms),
            mean_ms=statistics.fmean(ms),
            min_ms=ms[0],
            max_ms=ms[-1],
            iqr_ms=q[2] - q[0],
            stdev_ms=statistics.pstdev(ms),
            trials=len(ms),
            q1_ms=q[0],
            q3_ms=q[2],
        )

    def rounded(self) -> TimingStats:
        """The figures as a verdict stores them (to the nanosecond)."""
        return self.model_copy(update={k: round(v, 6) for k, v in self.__dict__.items() if isinstance(v, float)})

    @property
    def upper_ms(self) -> float:
        """The upper quartile (median + IQR/2 for verdicts stored without quartiles)."""
        return self.q3_ms or self.median_ms + self.iqr_ms / 2

    @property
    def lower_ms(self) -> float:
        return self.q1_ms or self.median_ms - self.iqr_ms / 2


class Timings(BaseModel):
    """Median milliseconds per call of each side (None: not timed)."""

    model_config = _LENIENT
    candidate: float | None = None
    eager: float | None = None
    compile: float | None = None


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


class PairedRatio(BaseModel):
    """A baseline's time over the candidate's, call by call: each candidate call was timed next to
    one baseline call (ABBA order across pairs), so load that comes and goes lands on both sides of
    a pair. ``low``-``high``: a distribution-free 95% confidence interval for the median ratio
    (order statistics of the pairs' ratios; with fewer than 6 pairs, their whole range)."""

    model_config = _LENIENT
    pairs: int
    median: float
    low: float
    high: float


class Contention(BaseModel):
    """What the OS said about the machine while the timed calls ran (Linux /proc; None elsewhere).

    ``other_cores``: CPU used by processes other than forge's own (the parent and both workers),
    in cores, over the timed span; ``steal``: the fraction of CPU time the hypervisor gave to other
    guests; ``max_running``: the most runnable tasks seen; ``retried``: batches timed again because
    the machine was busy; ``busy``: the measurement was still taken under load after the retries."""

    model_config = _LENIENT
    cores: int
    other_cores: float
    steal: float = 0.0
    max_running: int = 0
    retried: int = 0
    busy: bool = False
    detail: str = ""
    # False when the load check was off (parallel rounds, whose siblings are known load, or
    # load_check=false): the load is recorded, and acceptance does not refuse on it.
    enforced: bool = True


class UserLoop(BaseModel):
    """A finalist timed the way a user times it (``forge.verifier.user_loop``): in one fresh
    process, built as ``forge.kernelbank`` builds it, beside the reference and torch.compile of
    the reference, call by call in the judged regime, with the verifier workers' allocator regime.
    The banked claim is the lower of this and the isolated measurement (``claim_pairs``)."""

    model_config = _LENIENT
    regime: TimingRegime
    rounds: int
    threads: int
    heap: str = "kept"  # freed memory stays in the process (MALLOC_*_THRESHOLD_), as in the workers
    eager: PairedRatio | None = None  # eager's time over the kernel's, round by round
    compiled: PairedRatio | None = None  # torch.compile's over the kernel's
    # The reference against a second instance of itself, in the same loop before the candidate was
    # imported: how far two identical sides read apart in this loop (its noise).
    null: PairedRatio | None = None
    eager_ms: float | None = None  # medians
    kernel_ms: float | None = None
    compile_ms: float | None = None
    fallbacks: int = 0  # probe calls of the kernel in which the reference's forward ran
    tampered: list[str] = Field(default_factory=list)  # what the candidate changed in the loop's process
    failed: str | None = None  # why there is no measurement


class TimingSides(BaseModel):
    """The timing statistics of every side that was timed (absent sides are left out of the JSON).
    ``*_launch``: CUDA only, the host time spent inside one call (launching its work)."""

    model_config = _LENIENT
    candidate: TimingStats | None = None
    eager: TimingStats | None = None
    compile: TimingStats | None = None
    candidate_launch: TimingStats | None = None
    eager_launch: TimingStats | None = None
    paired_eager: PairedRatio | None = None  # eager / candidate, per adjacent pair (cold)
    paired_compile: PairedRatio | None = None  # torch.compile / candidate, per adjacent pair (cold)
    warm_paired_eager: PairedRatio | None = None  # the same, calls back to back on inputs just written
    warm_paired_compile: PairedRatio | None = None
    contention: Contention | None = None
    # The null control (a finalist's confirmation only): the op's reference timed against itself,
    # a clean worker standing in for the candidate's, in the judged regime and with as many calls.
    # How far two workers running the same code read apart; ``acceptance.null_bar`` uses it.
    null_eager: PairedRatio | None = None
    # The regime the headline speedups come from: warm when one call's inputs and outputs fit in
    # half the last-level cache (a model's activations of that size are still there when the op
    # runs), cold otherwise. None in verdicts from before forge timed both.
    regime: TimingRegime | None = None
    working_set_bytes: int | None = None  # one call's inputs and outputs
    cache_bytes: int | None = None  # the last-level cache (CPU L3, GPU L2)

    def headline_pairs(self) -> tuple[PairedRatio | None, PairedRatio | None]:
        """(vs eager, vs torch.compile) in the regime the verdict is judged in."""
        if self.regime is TimingRegime.WARM and self.warm_paired_eager is not None:
            return self.warm_paired_eager, self.warm_paired_compile
        return self.paired_eager, self.paired_compile

    @model_serializer(mode="wrap")
    def _present_only(self, handler: Any) -> dict[str, Any]:
        return _without_none(handler(self))


# How far past the roofline bound a candidate may run before its result, not only the estimate,
# is suspect: cache-resident data can beat the DRAM estimate a little, not by this much.
ROOFLINE_SLACK = 1.5


class Roofline(BaseModel):
    """The speed-of-light estimate: the op's bytes and FLOPs against this machine's measured
    bandwidth and matmul peak, and the fraction of it the candidate and eager reach."""

    model_config = _LENIENT
    bytes: int | None = None
    flops: int | None = None
    device_name: str | None = None
    bandwidth_gbs: float | None = None
    peak_gflops: float | None = None
    bound_ms: float | None = None
    fraction_candidate: float | None = None
    fraction_eager: float | None = None

    @property
    def holds(self) -> bool:
        """False when eager or the candidate runs faster than the bound allows: the estimate is
        then wrong for this op (data that stays in cache, the bytes or FLOPs it counts, or the
        measured peak), and no fraction of it is a fact."""
        return all(f is None or f <= 1.0 for f in (self.fraction_eager, self.fraction_candidate))

    @property
    def bound_by(self) -> str:
        """What limits the op on this machine: the larger of its bytes over the measured bandwidth
        and its FLOPs over the measured matmul peak (the two terms of ``bound_ms``)."""
        memory = self.bytes / self.bandwidth_gbs if self.bytes and self.bandwidth_gbs else 0.0
        compute = self.flops / self.peak_gflops if self.flops and self.peak_gflops else 0.0
        return "measured memory bandwidth" if memory >= compute else "measured matmul peak"

    @model_serializer(mode="wrap")
    def _present_only(self, handler: Any) -> dict[str, Any]:
        return _without_none(handler(self))


class MemoryPeak(BaseModel):
    """Peak resident size (MiB) of each process of a verification, and the bound it is held to:
    max(1 GiB, 8x the op's inputs and outputs of one call). ``forge_mib`` is the process that ran
    the verification (a session's, over the session so far); a reference worker kept across a
    session's verifications reports its peak over all of them."""

    model_config = _LENIENT
    candidate_mib: int | None = None
    reference_mib: int | None = None
    forge_mib: int | None = None
    bound_mib: int | None = None

    @property
    def within_bound(self) -> bool:
        peaks = [p for p in (self.candidate_mib, self.reference_mib, self.forge_mib) if p is not None]
        return self.bound_mib is None or all(p <= self.bound_mib for p in peaks)

    @model_serializer(mode="wrap")
    def _present_only(self, handler: Any) -> dict[str, Any]:
        return _without_none(handler(self))


class FailingCase(BaseModel):
    """The first case the candidate failed: which one, and (for a wrong result) how it was off."""

    model_config = _LENIENT
    id: str = ""
    shape: str = ""
    inputs: str = ""  # "normal" or the stress distribution
    output: int | None = None  # the first output that was off (-1: the output structure)
    mismatch: str | None = None  # count, missing, dtype, shape, device, nan, inf, values, structure
    detail: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None

    @model_serializer(mode="wrap")
    def _mismatch_when_known(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.mismatch is None:  # it raised: there is no result to describe
            return {k: data[k] for k in ("id", "shape", "inputs")}
        return data


class TensorSpec(BaseModel):
    model_config = _LENIENT
    shape: list[int]
    dtype: str


class InputVariant(BaseModel):
    """The inputs of one shape variant, as verified."""

    model_config = _LENIENT
    variant: str
    inputs: list[TensorSpec] = Field(default_factory=list)


class Versions(BaseModel):
    model_config = _LENIENT
    torch: str = ""
    python: str = ""
    triton: str = ""


class NodeSpec(BaseModel):
    """The cluster node a verification ran on (``forge optimize --executor ray``): speedups are
    compared only between verdicts timed on the same ``device_name``."""

    model_config = _LENIENT
    host: str = ""
    node_id: str = ""  # Ray's id for the node
    device_name: str = ""  # the CPU model or the GPU's name
    cpus: int = 0  # the cores its verifications were given

    @property
    def label(self) -> str:
        """host:node, short: several nodes may share a host."""
        return f"{self.host}:{self.node_id[:8]}"


class Binding(BaseModel):
    """How the candidate ran on an instance of the user's class holding weights of its own, the
    way ``bank.kernelize`` will run it (``mode`` none: kernelize leaves such instances alone)."""

    model_config = _LENIENT
    mode: BindMode
    reason: str = ""


class Verdict(BaseModel):
    """A plain, serializable record of one verification (see the module docstring)."""

    model_config = _LENIENT
    problem: str = ""
    candidate: str = ""
    device: str = ""
    status: VerdictStatus = VerdictStatus.PASSED
    reason: str | None = None
    checks: list[Check] = Field(default_factory=list)
    timings_ms: Timings = Field(default_factory=Timings)
    timing_stats: TimingSides = Field(default_factory=TimingSides)
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    timing_meaningful: bool = True
    roofline: Roofline | None = None
    memory: MemoryPeak | None = None
    failing_case: FailingCase | None = None
    warnings: list[str] = Field(default_factory=list)
    candidate_output: str = ""
    backend: str = "torch"
    op_hash: str = ""
    target_class: str | None = None  # "module:Class" when the op's Model comes from user code
    capability: str | None = None  # CUDA compute capability ("9.0"), None on CPU
    inputs: list[InputVariant] = Field(default_factory=list)
    cases: int = 0
    shapes: list[str] = Field(default_factory=list)
    seed: int = 0
    threads: int = 1
    elapsed_s: float = 0.0
    versions: Versions = Field(default_factory=Versions)
    binding: Binding | None = None  # None: not checked (a failed verdict, or an older forge)
    # The module modes the candidate was verified in; None: an older forge, which verified in
    # training mode (eval mode for a reference that is random in training mode).
    modes: list[ModuleMode] | None = None
    user_loop: UserLoop | None = None  # a finalist's confirmation: timed in a user's loop too
    node: NodeSpec | None = None  # the cluster node that verified it; None: the driver's own machine
    # A confirmation (the finalist timed again, alone, before banking): stored under the keys in
    # the aliases, as forge always has.
    confirm_trials: int | None = Field(default=None, alias="trials")  # timed calls a side
    confirm_held: bool | None = Field(default=None, alias="held")  # beat eager beyond the noise again
    confirm_reason: str | None = Field(default=None, alias="why")  # the acceptance rule's words
    confirm_attempt_id: int | None = None  # banked evidence: the confirmation's own attempt row
    # Banked evidence: True when timed again after it was chosen, False when banked from its round's
    # figures on a Ctrl-C; None for a kernel saved by `forge verify --save`.
    confirmed: bool | None = None

    @property
    def passed(self) -> bool:
        return self.status is VerdictStatus.PASSED

    def claim_pairs(self) -> tuple[PairedRatio | None, PairedRatio | None]:
        """(vs eager, vs torch.compile) as banked: per baseline, the lower of the isolated
        measurement (``TimingSides.headline_pairs``) and the user loop's, by median."""
        isolated = self.timing_stats.headline_pairs()
        loop = self.user_loop
        if loop is None:
            return isolated
        return _lower(isolated[0], loop.eager), _lower(isolated[1], loop.compiled)

    def add(self, name: str, passed: bool, detail: str = "", fatal: bool = True) -> Check:
        check = Check(name=name, passed=passed, detail=detail, fatal=fatal)
        self.checks.append(check)
        return check

    def fail(self, status: VerdictStatus, reason: str) -> None:
        """Record the first failure; later ones do not overwrite it."""
        assert status is not VerdictStatus.PASSED
        if self.status is VerdictStatus.PASSED:
            self.status = status
            self.reason = reason

    def first_failed_check(self) -> Check | None:
        """The first fatal check that failed (what made the verdict fail)."""
        return next((c for c in self.checks if not c.passed and c.fatal), None)

    def to_json(self) -> dict[str, Any]:
        """The JSON object ``forge verify --json`` prints and the bank stores (with ``passed``)."""
        data = self.model_dump(mode="json", by_alias=True)
        for key in _CONFIRMATION_KEYS:
            if data[key] is None:
                del data[key]
        data["passed"] = self.passed
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        """A stored verdict read back (ValueError when a field holds the wrong type)."""
        return cls.model_validate(data)


def _lower(a: PairedRatio | None, b: PairedRatio | None) -> PairedRatio | None:
    if a is None or b is None:
        return a or b
    return a if a.median <= b.median else b


_CONFIRMATION_KEYS = ("trials", "held", "why", "confirm_attempt_id", "confirmed")
