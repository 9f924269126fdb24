"""The timing figures a verdict carries: each side's statistics, the paired ratios (the speedups
forge judges and claims), the machine's load while they were taken, the confirmation's user loop,
and the roofline estimate. Typed records, stored inside a verdict's JSON (``forge.core.verdict``)
and read back leniently, as the verdict is."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from forge.core.statuses import TimingRegime

_LENIENT = ConfigDict(extra="ignore", populate_by_name=True)


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


def without_none(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without its None values (records that leave absent fields out of their JSON)."""
    return {k: v for k, v in data.items() if v is not None}


class PairedRatio(BaseModel):
    """A baseline's time over the candidate's, call by call: each candidate call was timed next to
    one baseline call (ABBA order across pairs), so load that comes and goes lands on both sides of
    a pair. ``low``-``high``: a distribution-free 95% confidence interval for the median ratio
    (order statistics of the pairs' ratios; with fewer than 6 pairs, their whole range). Measured in
    several processes (``processes`` > 1: ``across``), it is a range instead: every process's
    interval, which is no confidence interval but what separate processes were seen to read."""

    model_config = _LENIENT
    pairs: int
    median: float
    low: float
    high: float
    processes: int = 1

    @classmethod
    def across(cls, parts: Sequence[PairedRatio]) -> PairedRatio | None:
        """The same ratio measured in several processes, as one figure: the median of their
        medians, and the range spanning every part's interval. Two fresh processes running the
        same code read apart by about as much as either's own interval (where the allocator and
        the kernel place their memory differs from process to process), and a claim about a
        user's process must cover that."""
        if not parts:
            return None
        return cls(
            pairs=sum(p.pairs for p in parts),
            median=statistics.median(p.median for p in parts),
            low=min(p.low for p in parts),
            high=max(p.high for p in parts),
            processes=sum(p.processes for p in parts),
        )


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


class LoopProcess(BaseModel):
    """One fresh process of a user loop: its paired ratios (a baseline's time over the kernel's,
    round by round), its null (the reference against a second instance of itself, timed in the
    same loop before the candidate was imported: the loop's own noise) and its medians (ms)."""

    model_config = _LENIENT
    eager: PairedRatio | None = None
    compiled: PairedRatio | None = None  # torch.compile of the reference
    null: PairedRatio | None = None
    eager_ms: float | None = None
    kernel_ms: float | None = None
    compile_ms: float | None = None


class UserLoop(BaseModel):
    """A finalist timed the way a user times it (``forge.verifier.timing.user_loop``): in fresh processes,
    built as ``forge.kernelbank`` builds it, beside the reference and torch.compile of the
    reference, call by call in the judged regime, with the verifier workers' allocator regime.
    ``eager``, ``compiled`` and ``null`` are the processes' figures as one (``PairedRatio.across``:
    the median of their medians, a range spanning all of them). The banked claim is the lower
    of this and the isolated measurement (``Verdict.claim_pairs``)."""

    model_config = _LENIENT
    regime: TimingRegime
    rounds: int  # calls a side in each process
    threads: int
    heap: str = "kept"  # freed memory stays in the process (MALLOC_*_THRESHOLD_), as in the workers
    eager: PairedRatio | None = None
    compiled: PairedRatio | None = None
    null: PairedRatio | None = None
    eager_ms: float | None = None  # medians of the processes' medians
    kernel_ms: float | None = None
    compile_ms: float | None = None
    # Each process's own figures; empty in verdicts from a forge that timed one process.
    processes: list[LoopProcess] = Field(default_factory=list)
    fallbacks: int = 0  # probe calls of the kernel in which the reference's forward ran
    tampered: list[str] = Field(default_factory=list)  # what the candidate changed in the loop's process
    # Eager timed slower once the candidate was loaded, beyond the loop's noise: a timing, which a
    # machine's neighbour can also make, so a fresh process measures again before it counts.
    slowed: str | None = None
    # slowed readings that a fresh process measured again (and did not repeat)
    remeasured: list[str] = Field(default_factory=list)
    failed: str | None = None  # why there is no measurement

    @classmethod
    def of_processes(cls, said: UserLoop, processes: Sequence[LoopProcess]) -> UserLoop:
        """``said`` (regime, rounds, threads, heap, findings) carrying ``processes`` and their
        figures as one."""

        def ratio(pick: Callable[[LoopProcess], PairedRatio | None]) -> PairedRatio | None:
            found = [r for p in processes if (r := pick(p)) is not None]
            return PairedRatio.across(found) if len(found) == len(processes) else None

        def median_ms(pick: Callable[[LoopProcess], float | None]) -> float | None:
            found = [ms for p in processes if (ms := pick(p)) is not None]
            return round(statistics.median(found), 6) if found and len(found) == len(processes) else None

        return said.model_copy(
            update={
                "processes": list(processes),
                "eager": ratio(lambda p: p.eager),
                "compiled": ratio(lambda p: p.compiled),
                "null": ratio(lambda p: p.null),
                "eager_ms": median_ms(lambda p: p.eager_ms),
                "kernel_ms": median_ms(lambda p: p.kernel_ms),
                "compile_ms": median_ms(lambda p: p.compile_ms),
            }
        )


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
    warm_candidate: TimingStats | None = None  # the candidate's calls timed warm (None: older verdicts)
    warm_eager_time: TimingStats | None = None  # eager's calls in the warm pairs (None: older verdicts)
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
        return without_none(handler(self))


class TrainingStepTimes(BaseModel):
    """Training steps of the op (``forge verify --train``, ``forge optimize --train``): the forward
    with its inputs requiring grad, then the backward of fixed output gradients, timed call by
    call against eager's and torch.compile's steps (which compile the backward too), cold and
    warm as the forward calls are; ``regime``: the one the forward is judged in."""

    model_config = _LENIENT
    eager: PairedRatio | None = None  # cold
    compile: PairedRatio | None = None
    warm_eager: PairedRatio | None = None
    warm_compile: PairedRatio | None = None
    candidate_ms: float | None = None  # median step, judged regime
    eager_ms: float | None = None
    regime: TimingRegime = TimingRegime.COLD
    busy: str | None = None  # the machine's load, when other processes used the cores while they were timed
    compile_error: str | None = None  # torch.compile's training step failed: no compile ratios
    # the null control's steps: the reference's step against itself, judged regime (a finalist's)
    null_eager: PairedRatio | None = None

    def headline(self) -> tuple[PairedRatio | None, PairedRatio | None]:
        """(vs eager, vs torch.compile) in the judged regime."""
        if self.regime is TimingRegime.WARM and self.warm_eager is not None:
            return self.warm_eager, self.warm_compile
        return self.eager, self.compile

    @model_serializer(mode="wrap")
    def _present_only(self, handler: Any) -> dict[str, Any]:
        return without_none(handler(self))


def memory_s(nbytes: int, bytes_read: int | None, copy_gbs: float, read_gbs: float | None) -> float:
    """Seconds to move ``nbytes`` at a copy's bandwidth (its reads and writes counted); with the
    bytes read and the read bandwidth, the reads at that and each byte written at what a copy's
    write costs beyond its read (2/copy - 1/read): a copy's bound is then a copy's time, and an op
    that only reads is bound by reading (a copy's figure put it at half its speed or less)."""
    if bytes_read is None or not read_gbs:
        return nbytes / (copy_gbs * 1e9)
    # a sum is a lower bound on what reading alone reaches: never below a copy's counted rate, so
    # that no op's bound is looser than the copy's figure alone made it
    read_gbs = max(read_gbs, copy_gbs)
    per_written = max(2 / copy_gbs - 1 / read_gbs, 0.0) / 1e9
    return bytes_read / (read_gbs * 1e9) + max(nbytes - bytes_read, 0) * per_written


class Roofline(BaseModel):
    """The speed-of-light estimate: the op's bytes and FLOPs against this machine's measured
    bandwidth and matmul peak, and the fraction of it the candidate and eager reach."""

    model_config = _LENIENT
    bytes: int | None = None
    bytes_read: int | None = None  # of ``bytes``: the inputs and the state read (the rest is written)
    flops: int | None = None  # matmul and convolution multiply-adds some output needs, 2 per MAC
    # matmul work the reference does that no output needs (a causal mask's half: see needed_matmul)
    unneeded_flops: int | None = None
    transcendentals: int | None = None  # elements through exp, log, tanh, erf, ... (no peak prices them)
    device_name: str | None = None
    bandwidth_gbs: float | None = None
    peak_gflops: float | None = None
    bound_ms: float | None = None
    fraction_candidate: float | None = None
    fraction_eager: float | None = None
    fraction_compile: float | None = None  # torch.compile's code for the op, in the same regime
    # a copy's measured bandwidth where one call's data stays in a cache: at the working set
    # ``cache_working_set`` (the largest measured not above ``bytes``), or (None) half the last-level cache
    cache_bandwidth_gbs: float | None = None
    read_bandwidth_gbs: float | None = None  # a read alone, from DRAM (None: not measured)
    cache_read_bandwidth_gbs: float | None = None  # a read alone, where the cache's copy was measured
    cache_working_set: int | None = None
    cache_bound_ms: float | None = None  # the bound where one call's data stays in that cache
    # "cache": the op is judged warm and ``bound_ms`` is the cache's bound; None: DRAM's
    level: str | None = None
    # the measured matmul peak that eager's own call beat (``peak_gflops`` is then eager's rate:
    # a peak a library call exceeds bounds nothing); None: the measured peak stands
    measured_peak_gflops: float | None = None
    # bytes the op's math needs read a second time (after a reduction over groups of
    # ``reread_group_bytes`` of them, larger than the cache keeps between its reads), counted in
    # ``bound_ms`` (DRAM's) and, those past the fastest cache level, in ``cache_bound_ms``
    reread_bytes: int | None = None
    reread_group_bytes: int | None = None
    cache_reread_bytes: int | None = None

    def memory_s(self, cache: bool, copy_gbs: float, read_gbs: float | None) -> float:
        """Seconds to move the op's bytes, and those it reads again, at these bandwidths (the
        cache's: ``cache``)."""
        again = (self.cache_reread_bytes if cache else self.reread_bytes) or 0
        read = self.bytes_read + again if self.bytes_read is not None else None
        return memory_s((self.bytes or 0) + again, read, copy_gbs, read_gbs)

    @property
    def holds(self) -> bool:
        """False when eager or the candidate runs faster than the bound allows: the estimate is
        then wrong for this op (data that stays in cache, the bytes or FLOPs it counts, or the
        measured peak), and no fraction of it is a fact."""
        return all(f is None or f <= 1.0 for f in (self.fraction_eager, self.fraction_candidate, self.fraction_compile))

    @property
    def second_read_note(self) -> str:
        """ "; its math reads 16.78 MB of it a second time (...)" where the judged bound counts a
        second read, else ""."""
        cache = self.level == "cache"
        again = self.cache_reread_bytes if cache else self.reread_bytes
        if not again:
            return ""
        keeps = "the fastest cache level measured keeps" if cache else "the last-level cache keeps"
        groups = f" of {self.reread_group_bytes / 1e6:.2f} MB" if self.reread_group_bytes and not cache else ""
        return (
            f"; its math reads {again / 1e6:.2f} MB of it a second time (it uses a reduction's result beside "
            f"the data reduced, in groups{groups} larger than {keeps} between the two reads; what it keeps is "
            "not counted again): the bound counts that second read"
        )

    @property
    def transcendental_note(self) -> str:
        """ ", 8.4 M transcendental evaluations (not in the bound)" where the op makes any, else ""."""
        if not self.transcendentals:
            return ""
        return (
            f", {self.transcendentals / 1e6:.2f} M transcendental evaluations (exp, log, tanh, ...: not in the bound)"
        )

    @property
    def unneeded_note(self) -> str:
        """ " (and 0.27 GFLOP no output needs, left out: ...)" where the reference does such work."""
        if not self.unneeded_flops:
            return ""
        return (
            f" (its reference does {self.unneeded_flops / 1e9:.3f} GFLOP more that no output needs, left out: "
            "scores a mask removes, products with weights that are zero on every draw)"
        )

    @property
    def cache_measured(self) -> str:
        """Where the in-cache bandwidths were measured, in words."""
        if not self.cache_working_set:
            return "a copy that stays in the last-level cache"
        mib = f"{self.cache_working_set / 2**20:.0f} MiB"
        if self.bytes is not None and self.cache_working_set > self.bytes:
            return f"a copy of {mib} kept in cache (the smallest measured; this op moves {self.bytes / 1e6:.2f} MB)"
        return (
            f"a copy of {mib} kept in cache (the largest measured not above this op's {(self.bytes or 0) / 1e6:.2f} MB)"
        )

    def beside_eager(self, eager_ms: float | None) -> Roofline:
        """This estimate with its matmul peak raised to eager's own rate where eager's whole call
        does the op's FLOPs faster than the measured peak allows (a GEMM benchmark that missed the
        library's best kernel for the shape: eager's matmul ran at 336 GFLOP/s where the peak read
        326), both bounds computed again at that rate; ``measured_peak_gflops`` keeps the measured
        figure. Called before ``level`` is set: ``bound_ms`` is DRAM's then."""
        if not (self.flops and eager_ms and self.peak_gflops) or self.flops / (eager_ms * 1e6) <= self.peak_gflops:
            return self
        rate = self.flops / (eager_ms * 1e6)
        compute_s = self.flops / (rate * 1e9)

        def bound(cache: bool, copy_gbs: float | None, read_gbs: float | None) -> float | None:
            if not copy_gbs:
                return None
            return round(max(self.memory_s(cache, copy_gbs, read_gbs), compute_s) * 1e3, 6)

        return self.model_copy(
            update={
                "peak_gflops": round(rate, 3),
                "measured_peak_gflops": self.measured_peak_gflops or self.peak_gflops,
                "bound_ms": bound(False, self.bandwidth_gbs, self.read_bandwidth_gbs) or round(compute_s * 1e3, 6),
                "cache_bound_ms": bound(True, self.cache_bandwidth_gbs, self.cache_read_bandwidth_gbs),
            }
        )

    @property
    def bound_by(self) -> str:
        """What limits the op on this machine: the larger of its bytes over the measured bandwidth
        and its FLOPs over the measured matmul peak (the two terms of ``bound_ms``)."""
        bandwidth = self.cache_bandwidth_gbs if self.level == "cache" else self.bandwidth_gbs
        read = self.cache_read_bandwidth_gbs if self.level == "cache" else self.read_bandwidth_gbs
        memory = self.memory_s(self.level == "cache", bandwidth, read) if self.bytes and bandwidth else 0.0
        compute = self.flops / (self.peak_gflops * 1e9) if self.flops and self.peak_gflops else 0.0
        if memory < compute:
            return (
                "eager's own matmul rate, above the measured peak"
                if self.measured_peak_gflops
                else "measured matmul peak"
            )
        return "measured in-cache bandwidth" if self.level == "cache" else "measured memory bandwidth"

    @model_serializer(mode="wrap")
    def _present_only(self, handler: Any) -> dict[str, Any]:
        return without_none(handler(self))
