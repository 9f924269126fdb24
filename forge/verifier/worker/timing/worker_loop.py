"""The timed loop both workers run (the worker's side of timing).

A trial is: flush the cache, take the clock, call once on an input set never used before, stop
the clock after the device is synchronized (on CUDA: events around the call, queued behind the
flush; see ``timed_loop``). The clock functions are passed in by the worker, which bound them
before any candidate code was imported.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from forge.verifier.worker.timing.heap_room import hold_large_chunks, prefault_heap


@dataclass
class Clocks:
    """Clock and sync primitives captured at worker start-up."""

    host_ns: Callable[[], int]
    sync: Callable[[], None]
    event_cls: Callable[..., Any] | None = None  # torch.cuda.Event, or None on CPU
    record: Callable[[Any], None] = lambda event: None
    elapsed: Callable[[Any, Any], float] = lambda start, end: 0.0
    cover: Callable[[], None] = lambda: None  # CUDA: device work queued after the flush (see timed_loop)


@dataclass
class TimedRun:
    """What one timed loop measured, per call (nanoseconds)."""

    times: list[int]  # the primary clock: the call's device time on CUDA, host time on CPU
    host: list[int]  # host clock around the whole trial and a full device synchronize
    window: list[int]  # the stream's events over the same span as ``host`` (CUDA; else ``host``)
    launch: list[int]  # host time inside the call: what the caller's thread spends launching it
    outputs: list[Any]


class TimedCalls:
    """Timed calls one at a time, for a parent that pairs them with the other side's calls.

    ``begin`` makes room in the heap, pauses the garbage collector and runs the warm-up calls;
    each ``one`` is a trial (see ``timed_loop``); ``end`` resumes the collector. Between trials
    the worker waits for the parent, which meanwhile times the other side.

    ``warm``: the warm regime. No cache flush, and every call on the same buffers, its own set's
    values written into them just before the clock starts (as the layer before writes a model's
    activations), then one untimed call just before the timed one (``call_before``): the op
    runs back to back, as a user's loop runs it, and finds its inputs in cache.
    """

    def __init__(
        self,
        call: Callable[[Sequence[Any]], Any],
        flush: Callable[[], None],
        clocks: Clocks,
        tick: Callable[[], None] | None = None,
        keep: Callable[[Any], Any] = lambda out: None,
        warm: bool = False,
    ) -> None:
        self.call, self.clocks, self.tick, self.keep = call, clocks, tick, keep
        self.flush = (lambda: None) if warm else flush
        self.warm = warm
        self.buffers: list[Any] | None = None  # the warm regime's inputs, rewritten each call
        self.run = TimedRun([], [], [], [], [])
        self._gc: contextlib.ExitStack | None = None

    @classmethod
    def idle(cls, flush: Callable[[], None], clocks: Clocks) -> TimedCalls:
        """Nothing being timed (before the first batch, after the last): holds no inputs."""
        return cls(lambda _inputs: None, flush, clocks)

    def begin(
        self,
        sets: Sequence[Sequence[Any]],
        warmup: Sequence[Sequence[Any]],
        prefault: bool = True,
        budget: int | None = None,
    ) -> None:
        """Each warm-up input set is called twice, untimed (one set, not two: with 1 GiB inputs a
        second set was another 1 GiB in each worker, and twice that while it was received).
        ``prefault``: False where another TimedCalls of this worker already made the room;
        ``budget``: the bytes the worker may hold (see ``prefault_heap``)."""
        if self.warm:
            self.buffers = [x.clone() for x in sets[0]]
            warmup = [self.buffers]
        if prefault and self.clocks.event_cls is None:  # CPU: room for the outputs and temporaries, touched
            prefault_heap(sets, budget)
        self._gc = contextlib.ExitStack()
        self._gc.enter_context(_gc_paused())
        for inputs in [*warmup, *warmup]:
            self.call(inputs)
        self.clocks.sync()
        if self.clocks.event_cls is None:  # the warm-up's temporaries may have grown the heap's top past the threshold
            hold_large_chunks()

    def one(self, inputs: Sequence[Any]) -> int:
        """One trial; returns its time on the primary clock (ns)."""
        if self.buffers is not None:
            for buf, x in zip(self.buffers, inputs, strict=True):
                buf.copy_(x)
            inputs = self.buffers
            call_before(self.call, inputs)
        clocks, run, tick = self.clocks, self.run, self.tick
        if clocks.event_cls is not None:
            clocks.sync()
            if tick:
                tick()
            mark, start, end = (clocks.event_cls(enable_timing=True) for _ in range(3))
            h0 = clocks.host_ns()
            clocks.record(mark)
            self.flush()
            clocks.cover()
            clocks.record(start)
            c0 = clocks.host_ns()
            out = self.call(inputs)
            run.launch.append(clocks.host_ns() - c0)
            clocks.record(end)
            clocks.sync()
            run.host.append(clocks.host_ns() - h0)
            run.times.append(int(clocks.elapsed(start, end) * 1e6))
            run.window.append(int(clocks.elapsed(mark, end) * 1e6))
        else:
            self.flush()
            if tick:
                tick()
            t0 = clocks.host_ns()
            out = self.call(inputs)
            clocks.sync()
            took = clocks.host_ns() - t0
            for series in (run.times, run.host, run.window, run.launch):
                series.append(took)
        if tick:
            tick()
        run.outputs.append(self.keep(out))
        del out
        return run.times[-1]

    def end(self) -> TimedRun:
        if self._gc is not None:
            self._gc.close()
            self._gc = None
        return self.run


def call_before(call: Callable[[Sequence[Any]], Any], inputs: Sequence[Any]) -> None:
    """One untimed call just before a warm trial, on the trial's floating-point inputs negated
    (then negated back, in place: the timed call gets the trial's own values).

    Each warm trial first writes its values into the buffers, and a call timed right after a call
    of another side read slow and scattered: its threads, its heap and its data in the cores' caches
    were as that call left them. On the quarter-size RMSNorm, in a plain loop in the workers'
    environment (2-core VM, ``benchmarks.claims.back_to_back``), eager read 0.41-0.44 ms that way
    and 0.24-0.29 ms back to back; the reference against a copy of itself 0.56-1.88x (95% interval)
    against 0.84-1.20x; and with torch.compile's calls in the rotation, as the user loop has them,
    eager read 1.24-1.48x slower than its copy at the median, against 1.06-1.08x. A user times a
    kernel back to back. The call before sees other values (the negation), so a result kept from
    it, keyed on the inputs' pointers, versions or contents, is not the timed call's; integer and
    boolean inputs stay as they are (indices, masks). A call before that raises (an op defined for
    positive inputs only) leaves the trial without one."""
    flipped = [x for x in inputs if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())]
    with torch.no_grad():  # inputs that require grad (a training step's) are negated in place too
        for x in flipped:
            x.neg_()
    try:
        call(inputs)
    except Exception:  # the trial itself runs the call again, and says what it raised
        pass
    finally:
        with torch.no_grad():
            for x in flipped:
                x.neg_()


def timed_loop(
    call: Callable[[Sequence[Any]], Any],
    sets: Sequence[Sequence[Any]],
    warmup: Sequence[Sequence[Any]],
    flush: Callable[[], None],
    clocks: Clocks,
    tick: Callable[[], None] | None = None,
    keep: Callable[[Any], Any] = lambda out: None,
) -> TimedRun:
    """Warm-up calls, then one timed call per input set.

    On CUDA each trial queues the cache flush, a fixed device-side wait (``clocks.cover``, ~0.5 ms)
    and then the call behind a pair of events, without a synchronize between them: the host
    launches the call while the device is still busy, as it does in a model whose queue is busy,
    so the events time the call's device work and not the launch (what ``triton.testing.do_bench``
    times). The flush alone (~0.1 ms on an H100) was too short: a Python launch of 40-100 us
    sometimes outran it, and the trials it did were charged the rest, which spread the quartiles
    of fast kernels over 2x. Host time in the call beyond the cover leaves the device idle inside
    the events and is charged. The host time inside the call is reported on its own (``launch``):
    a kernel whose launch costs more than its device work is launch-bound, and only a model that
    keeps the device busy hides that. The host clock around the whole trial and a device
    synchronize, against events over the same span, catches work that escaped the stream (side
    streams).

    Each output is handed to ``keep`` after the clock stopped and then released, as a program in a
    loop releases it: holding every output would make each call's output buffer fresh memory, and
    the first-touch page faults (10x the kernel on a 16 MB output) would be timed instead.
    """
    calls = TimedCalls(call, flush, clocks, tick, keep)
    calls.begin(sets, warmup)
    try:
        for inputs in sets:
            calls.one(inputs)
    finally:
        run = calls.end()
    return run


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Collect, then keep Python's cyclic garbage collector off (as ``timeit`` does). It runs when
    allocations pass a threshold, wherever that happens to be: inside a timed call it added 16 ms
    to one 2 ms call of six."""
    enabled = gc.isenabled()
    gc.collect()
    # What survived moves to the permanent generation, so the next batch's collection scans only
    # what is new: a full one walks torch's objects (~0.15 s on the 2-core VM, per batch and side).
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
