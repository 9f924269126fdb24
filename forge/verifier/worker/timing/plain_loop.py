"""A plain timing loop, the way a user checks a kernel: the sides in one process, called in turn,
``time.perf_counter_ns`` around each call. The confirm step's user loop (``user_loop``) and
``benchmarks.claims.reproduce`` both time with it, so a banked figure and its reproduction are the
same measurement taken twice.

Each round calls every side once, the order rotating from round to round, so load that comes and
goes lands on all of them; the ratio of two sides is taken per round (``pairing.paired_ratio``).

* warm: the same buffers every call, the round's values written into them first (as the layer
  before writes a model's activations), then one untimed call of the same side, back to back, as
  the verifier's warm trials run (``worker_loop.call_before``), no cache flush;
* cold: the last-level cache flushed before each call, on inputs drawn for that round. On a CPU
  the flush reads a buffer twice the cache's size, as the verifier's workers do: a flush that
  writes leaves the cache full of dirty lines whose write-back the next call then pays (measured
  in this loop: rmsnorm's kernel 2.51x eager with a writing flush, 3.5x with a reading one; the
  fixed write-back cost lands on both sides and compresses every ratio). On CUDA it writes, as
  ``triton.testing.do_bench`` does (the L2 is written back by the device, not timed by the host).

Nothing else is done that a user's loop would not do: the garbage collector runs, the heap is the
process's own (its allocator regime is the environment's), outputs are dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from forge.verifier.worker.timing.worker_loop import call_before

Side = Callable[[Sequence[torch.Tensor]], Any]
WARMUP_CALLS = 3  # untimed calls a side first (torch.compile's graph is built by the first)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_sides(
    sides: dict[str, Side],
    draw: Callable[[], list[torch.Tensor]],
    rounds: int,
    cold: bool,
    flush_bytes: int,
    device: str = "cpu",
    *,
    before_call: Callable[[], object] | None = None,
    after_call: Callable[[object], object] | None = None,
    back_to_back: bool = True,
) -> dict[str, list[int]]:
    """Per-call nanoseconds of each side, ``rounds`` calls a side, interleaved call by call.
    ``back_to_back``: warm calls follow an untimed call of their own side (``call_before``);
    False only for ``benchmarks.claims.back_to_back``, which shows what it changes.

    ``before_call`` runs just before the clock starts (after the flush or the refill) and
    ``after_call`` gets each output once the clock stopped: ``benchmarks.claims.loop_conditions``
    adds the verifier workers' conditions to this loop through them, one at a time."""
    flush = torch.ones(max(1, flush_bytes // 4), device=device) if cold else None
    buffers = draw()
    names = list(sides)
    out: dict[str, list[int]] = {n: [] for n in names}
    with torch.no_grad():
        for name in names:
            for _ in range(WARMUP_CALLS):
                sides[name](buffers)
        _sync(device)
        for r in range(rounds):
            fresh = draw()
            for name in names[r % len(names) :] + names[: r % len(names)]:
                if cold:
                    inputs: Sequence[torch.Tensor] = fresh
                    assert flush is not None
                    flush.zero_() if device == "cuda" else flush.sum()
                else:
                    for buf, x in zip(buffers, fresh, strict=True):
                        buf.copy_(x)
                    inputs = buffers
                    if back_to_back:
                        call_before(sides[name], inputs)
                _sync(device)
                if before_call is not None:
                    before_call()
                t0 = time.perf_counter_ns()
                result = sides[name](inputs)
                if after_call is None:  # dropped at once, as a loop that ignores the output drops it
                    result = None
                _sync(device)
                out[name].append(time.perf_counter_ns() - t0)
                if after_call is not None:
                    after_call(result)
                result = None
    return out


__all__ = ["WARMUP_CALLS", "Side", "time_sides"]
