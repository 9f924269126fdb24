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

LENIENT = ConfigDict(extra="ignore", populate_by_name=True)


class TimingStats(BaseModel):
    """One side's timed calls: median, spread and quartiles in milliseconds."""

    model_config = LENIENT
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

    model_config = LENIENT
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

    model_config = LENIENT
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

    model_config = LENIENT
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

    model_config = LENIENT
    eager: PairedRatio | None = None
    compiled: PairedRatio | None = None  # torch.compile of the reference
    null: PairedRatio | None = None
    eager_ms: float | None = None
    kernel_ms: float | None = None
    compile_ms: float | None = None


class UserLoop(BaseModel):
    """A finalist timed the way a user times it (``forge.verifier.parent.timing.user_loop``): in fresh processes,
    built as ``forge.kernelbank`` builds it, beside the reference and torch.compile of the
    reference, call by call in the judged regime, with the verifier workers' allocator regime.
    ``eager``, ``compiled`` and ``null`` are the processes' figures as one (``PairedRatio.across``:
    the median of their medians, a range spanning all of them). The banked claim is the lower
    of this and the isolated measurement (``Verdict.claim_pairs``)."""

    model_config = LENIENT
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

    model_config = LENIENT
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

    model_config = LENIENT
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
