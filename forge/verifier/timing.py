"""The timed loop both workers run, and the statistics the parent computes from it.

A trial is: flush the cache, take the clock, call once on an input set never used before, stop
the clock after the device is synchronized. The clock functions are passed in by the worker,
which bound them before any candidate code was imported.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TimingStats:
    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    stdev_ms: float
    trials: int

    def to_dict(self) -> dict[str, float | int]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def stats_from_ns(times_ns: Sequence[float]) -> TimingStats:
    ms = sorted(t / 1e6 for t in times_ns)
    if not ms:
        raise ValueError("no timing trials")
    q = statistics.quantiles(ms, n=4) if len(ms) >= 2 else [ms[0], ms[0], ms[0]]
    return TimingStats(
        median_ms=statistics.median(ms),
        mean_ms=statistics.fmean(ms),
        min_ms=ms[0],
        max_ms=ms[-1],
        iqr_ms=q[2] - q[0],
        stdev_ms=statistics.pstdev(ms),
        trials=len(ms),
    )


@dataclass
class Clocks:
    """Clock and sync primitives captured at worker start-up."""

    host_ns: Callable[[], int]
    sync: Callable[[], None]
    event_cls: Any = None  # torch.cuda.Event, or None on CPU
    record: Any = None
    elapsed: Any = None


def timed_loop(
    call: Callable[[Sequence[Any]], Any],
    sets: Sequence[Sequence[Any]],
    warmup: Sequence[Sequence[Any]],
    flush: Callable[[], None],
    clocks: Clocks,
    tick: Callable[[], None] | None = None,
) -> tuple[list[int], list[int], list[Any]]:
    """Warm-up calls, then one timed call per input set.

    Returns (ns per call by the primary clock, ns per call by the host clock around the call and a
    full device synchronize, outputs). On CUDA the primary clock is a pair of events on the current
    stream; the host figure catches work that escaped them (side streams).
    """
    for inputs in warmup:
        call(inputs)
    clocks.sync()
    times: list[int] = []
    host: list[int] = []
    outputs: list[Any] = []
    for inputs in sets:
        flush()
        clocks.sync()
        if tick:
            tick()
        if clocks.event_cls is not None:
            start, end = clocks.event_cls(enable_timing=True), clocks.event_cls(enable_timing=True)
            h0 = clocks.host_ns()
            clocks.record(start)
            out = call(inputs)
            clocks.record(end)
            clocks.sync()
            host.append(clocks.host_ns() - h0)
            times.append(int(clocks.elapsed(start, end) * 1e6))
        else:
            t0 = clocks.host_ns()
            out = call(inputs)
            clocks.sync()
            times.append(clocks.host_ns() - t0)
            host.append(times[-1])
        if tick:
            tick()
        outputs.append(out)
    return times, host, outputs
