"""Eager's (and torch.compile's) time for the brief, taken as the verifier's workers take it: the
same trial (``timing.worker_loop.TimedCalls``) in the regime the verdicts judge the op in. Warm:
the same buffers, the next set's values written into them before each timed call; cold: the
last-level cache flushed first, each call on another input set.
Timed back to back on one input instead, the brief's eager read 0.5-0.8x what every verdict then
compared against (layernorm 0.85 ms against 1.69 ms, 2-core VM): a coder told the first figure
aimed at a target no verdict would confirm."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from forge.verifier.machine.facts import flush_bytes
from forge.verifier.worker.timing.worker_loop import Clocks, TimedCalls

Call = Callable[[Sequence[Any]], Any]


def _flush(device: str) -> Callable[[], Any]:
    if device == "cuda":
        return torch.empty(flush_bytes(device) // 4, device="cuda").zero_
    return torch.ones(flush_bytes(device) // 4).sum  # read, as the workers' flush reads


def regime_times_ms(
    sides: dict[str, Call], sets: Sequence[Sequence[Any]], warm: bool, device: str, pairs: int
) -> dict[str, float]:
    """Each side's median time a call (ms) over ``pairs`` rounds, the sides alternating which goes
    first; ``sets`` are cycled (a cold call's data is flushed anyway, a warm call's values are
    written in)."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    clocks = Clocks(host_ns=time.perf_counter_ns, sync=sync)
    flush = _flush(device)
    calls = {name: TimedCalls(call, flush, clocks, warm=warm) for name, call in sides.items()}
    names = list(calls)
    times: dict[str, list[int]] = {n: [] for n in names}
    with torch.no_grad():
        for k, name in enumerate(names):
            calls[name].begin(sets, sets[:1], prefault=k == 0 and device != "cuda")
        try:
            for i in range(pairs):
                for name in names if i % 2 == 0 else list(reversed(names)):
                    times[name].append(calls[name].one(sets[i % len(sets)]))
        finally:
            for c in calls.values():
                c.end()
    return {n: statistics.median(t) / 1e6 for n, t in times.items()}
