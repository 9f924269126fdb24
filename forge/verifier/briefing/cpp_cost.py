"""What a C++ kernel pays on this machine before its own work: a ``forge.cpp`` call (the argument
checks and ctypes) and an OpenMP parallel region (waking the pool's threads), measured in the
brief's process so the coder can tell a fixed cost from its loop's. A candidate's profile names
each C function's own time; the rest of a call (``other_share``) is Python, torch's allocations
and these."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forge import cpp
from forge.verifier.machine.contention import LoadMonitor
from forge.verifier.machine.readings import best_call_seconds

# an empty function and an empty parallel region: what a call costs with no work in it
_SOURCE = r"""
#include <cstdint>
extern "C" void forge_nothing(const float* a, const float* b, const float* c, const float* d,
                              const float* e, const float* f, const float* g, const float* h, int64_t n) {}
extern "C" void forge_empty_region(int64_t n) {
    #pragma omp parallel
    { if (n < 0) __builtin_trap(); }
}
"""
MOST_TENSORS = 8  # the empty function's pointer arguments
_LOOP = 200  # calls a timed loop
_IDLE_S = 0.005  # a pause long enough for OpenMP's spinning threads to sleep


@dataclass(frozen=True)
class CppCallCost:
    """Microseconds a call: a ``forge.cpp`` call passing ``tensors`` tensors and an int to a C
    function that does nothing; an empty OpenMP parallel region on ``threads`` threads, called back
    to back (the pool spinning) and after a pause (the pool asleep, woken)."""

    tensors: int
    call_us: float
    region_us: float
    region_after_idle_us: float
    threads: int
    load: str | None = None  # other processes' use of the cores while it was measured, where they were busy

    def said(self) -> str:
        """The runtime fact the brief states."""
        loaded = (
            f" (measured while {self.load}: a woken thread waited for a core, so these read high)" if self.load else ""
        )
        return loaded.join(self._figures())

    def _figures(self) -> tuple[str, str]:
        return (
            f"forge.cpp's fixed cost here: {self.call_us:.1f} µs a call passing {self.tensors} tensors and an int "
            f"to a C function that does nothing (its argument checks and ctypes); an empty `#pragma omp parallel` "
            f"region on {self.threads} threads {self.region_us:.1f} µs called back to back, "
            f"{self.region_after_idle_us:.0f} µs after {_IDLE_S * 1e3:.0f} ms idle (the pool's threads woken: the "
            "paired timing's cold calls can pay it, eager's too, since each worker waits for the parent between calls "
            "and its threads sleep after about 0.2 ms; a warm call follows an untimed call of its own, back to back, "
            "as the user loop's calls do, and does not)",
            ". A candidate profile's time in no row is Python, torch's allocations and these",
        )


def _per_call_us(fn: Callable[..., Any], args: tuple[object, ...]) -> float:
    """The best of five timed loops of ``_LOOP`` calls, a call's share in µs."""
    return best_call_seconds("cpu", lambda: fn(*args), reps=5, inner=_LOOP) * 1e6


def _after_idle_us(fn: object) -> float:
    """The median of 15 calls, each after ``_IDLE_S`` of sleep, in µs."""
    times = []
    for _ in range(15):
        time.sleep(_IDLE_S)
        start = time.perf_counter()
        fn(1)  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def measure_cpp_cost(tensors: int) -> CppCallCost:
    """Built once (cached on disk by ``forge.cpp``), then timed: a fraction of a second."""
    import torch

    lib = cpp.load(_SOURCE, timeout_s=60.0)  # well inside the brief's own limit: a stuck compiler is a missing fact
    passed = max(1, min(tensors, MOST_TENSORS))
    x = torch.zeros(4)
    # the arguments the empty function does not get are passed as None (NULL): no check, no conversion
    args = (*([x] * passed), *([None] * (MOST_TENSORS - passed)), 4)
    monitor = LoadMonitor([])  # this process's own threads are not load
    start = monitor.sample()
    call_us = _per_call_us(lib.forge_nothing, args)
    region_us = _per_call_us(lib.forge_empty_region, (1,))
    idle_us = _after_idle_us(lib.forge_empty_region)
    load = monitor.between(start, monitor.sample())
    return CppCallCost(
        passed,
        round(call_us, 2),
        round(region_us, 2),
        round(idle_us, 1),
        torch.get_num_threads(),
        load.detail if load is not None and load.busy else None,
    )


__all__ = ["MOST_TENSORS", "CppCallCost", "measure_cpp_cost"]
