"""Where the isolated verification and a user's loop read apart: the workers' conditions, one at a time.

forge times a candidate in two isolated worker processes (``forge.verifier``) and again in a plain
loop in one process, as its user would (``forge.verifier.worker.timing.plain_loop``); the banked claim is the
lower of the two. This script bisects the gap between them: for each active kernel of BANK (or
``--kernel ID``) it times, in the kernel's judged regime and in one process,

* ``plain``: the plain loop (``plain_loop.time_sides``) as the user loop and reproduce.py run it;
* the plain loop with one condition of the verifier's workers added:
  - ``freed after``: each output freed after the clock stops (the plain loop drops it inside the
    timed span, the workers after);
  - ``outputs kept``: each output copied into a buffer of its own after the clock (the candidate
    worker keeps its timed outputs to check them);
  - ``gc paused``: Python's collector frozen and off for the batch (the workers pause it);
  - ``heap room``: the heap grown and touched before the batch (``timing.prefault_heap``);
  - ``premade inputs``: cold inputs drawn before the batch, one set per call (the workers get a
    batch of sets; the loop draws each round's just before it);
  - ``idle 1 ms``: 1 ms asleep before each call (a worker waits while the other side runs);
* ``all``: every condition above at once;
* with ``--isolated``, the isolated verification itself (``VerifierService``, two workers, as
  many calls a side, no user loop and no null control).

The conditions run in turn, the whole sweep ``--repeats`` times with the order rotated, and each
figure pools its rounds: eager's time over the kernel's, the median per-round ratio and its 95%
interval (``pairing.paired_ratio``). libgomp reads its spinning once, at start: run the script
again under ``GOMP_SPINCOUNT=10000`` (the workers' setting) to see that condition; the header says
which is in force.

Usage: python -m benchmarks.claims.loop_conditions BANK [--kernel ID ...] [--rounds N] [--repeats N] [--isolated]
       [--heap kept|returned]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch

import forge.kernelbank as kb
from benchmarks.claims.reproduce import fallback, with_heap
from benchmarks.support.banked import active_kernels
from benchmarks.support.page import add_page_option, run_with_page
from forge.core.importing import import_file
from forge.core.pairing import paired_ratio
from forge.core.settings import load_settings
from forge.db.engine import open_for_writing
from forge.db.kernels import kernel_detail
from forge.verifier import Job, VerifierService
from forge.verifier.machine.facts import cpu_flush_bytes
from forge.verifier.worker.output_copies import OutputPool
from forge.verifier.worker.timing.plain_loop import Side, time_sides
from forge.verifier.worker.timing.worker_loop import prefault_heap

CONDITIONS = ("plain", "freed after", "outputs kept", "gc paused", "heap room", "premade inputs", "idle 1 ms", "all")


@contextlib.contextmanager
def _gc_paused(on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def one_condition(
    name: str, sides: dict[str, Side], draw: Callable[[], list[torch.Tensor]], rounds: int, cold: bool
) -> dict[str, list[int]]:
    """``rounds`` calls a side in the plain loop with ``name``'s conditions added."""
    every = name == "all"
    sets: list[list[torch.Tensor]] = []
    if cold and (every or name == "premade inputs"):
        sets = [draw() for _ in range(rounds + 1)]  # the first for the warm-up buffers
    source: Callable[[], list[torch.Tensor]] = (lambda: sets.pop()) if sets else draw
    if every or name == "heap room":
        prefault_heap(sets or [draw()])
    pool = OutputPool()
    after: Callable[[object], object] | None = None
    if every or name == "outputs kept":
        after = lambda out: [pool.copy(o) for o in (out if isinstance(out, (list, tuple)) else [out])]  # noqa: E731
    elif name == "freed after":
        after = lambda out: None  # noqa: E731
    before = (lambda: time.sleep(0.001)) if every or name == "idle 1 ms" else None
    with _gc_paused(every or name == "gc paused"):
        return time_sides(sides, source, rounds, cold, cpu_flush_bytes(), before_call=before, after_call=after)


def sweep(
    sides: dict[str, Side], draw: Callable[[], list[torch.Tensor]], rounds: int, cold: bool, repeats: int
) -> dict[str, tuple[list[int], list[int]]]:
    """Every condition ``repeats`` times, the order rotated each time; per condition, the eager
    and kernel times pooled over the repeats."""
    pooled: dict[str, tuple[list[int], list[int]]] = {c: ([], []) for c in CONDITIONS}
    for r in range(repeats):
        for name in CONDITIONS[r % len(CONDITIONS) :] + CONDITIONS[: r % len(CONDITIONS)]:
            t = one_condition(name, sides, draw, rounds, cold)
            pooled[name][0].extend(t["eager"])
            pooled[name][1].extend(t["kernel"])
    return pooled


def isolated(op_path: Path, source: str, rounds: int) -> str:
    """The isolated verification's paired ratio in its judged regime, as many calls a side."""
    settings = load_settings(user_loop=False, null_control=False, compile_baseline=False, timing_trials=rounds)
    with VerifierService(op_path, settings, "cpu") as service:
        v = service.verify_alone(Job("kernel", source), rounds, settings.timeout)
    pair = v.timing_stats.headline_pairs()[0]
    if not v.passed or pair is None:
        return f"not timed ({v.status}: {v.reason})"
    return f"{pair.median:.2f}x ({pair.low:.2f}-{pair.high:.2f}) over {pair.pairs} pairs"


def _ratio(eager: Sequence[int], kernel: Sequence[int]) -> str:
    r = paired_ratio(list(eager), list(kernel))
    return "-" if r is None else f"{r.median:.2f}x ({r.low:.2f}-{r.high:.2f})"


def measure_kernel(bank: kb.KernelBank, op_path: Path, op: str, judged: str, a: argparse.Namespace) -> list[str]:
    op_module = import_file(f"conditions_{op}", op_path)
    init = op_module.get_init_inputs()
    torch.manual_seed(0)
    reference = op_module.Model(*init).eval()
    kernel = bank.load(op, *init).eval()
    kernel.load_state_dict(reference.state_dict())
    why = fallback(bank, op, kernel, op_module.get_inputs())
    if why is not None:
        return [f"  NOT RUNNING: {why}"]
    sides: dict[str, Side] = {"eager": lambda x: reference(*x), "kernel": lambda x: kernel(*x)}
    with torch.no_grad():
        pooled = sweep(sides, op_module.get_inputs, a.rounds, judged == "cold", a.repeats)
    return [f"  {name:15s} {_ratio(*pooled[name])}" for name in CONDITIONS]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bank", type=Path)
    ap.add_argument("--kernel", type=int, action="append", help="only these kernel ids")
    ap.add_argument("--rounds", type=int, default=31, help="calls a side per condition and repeat")
    ap.add_argument("--repeats", type=int, default=3, help="sweeps over the conditions, the order rotated")
    ap.add_argument("--isolated", action="store_true", help="also verify each kernel in two isolated workers")
    ap.add_argument("--heap", choices=("kept", "returned"), default="kept")
    add_page_option(ap)
    a = ap.parse_args()
    with_heap(a.heap)
    engine = open_for_writing(a.bank)
    bank = kb.open(a.bank)
    spin = os.environ.get("GOMP_SPINCOUNT", "libgomp's default")
    print(
        f"{torch.get_num_threads()} threads, heap {a.heap}, GOMP_SPINCOUNT {spin}; {a.rounds} rounds x "
        f"{a.repeats} repeats a condition; eager's time over the kernel's, median per round (95% CI)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for summary in active_kernels(engine, a.kernel):
            k = kernel_detail(engine, summary.id)
            op_path = Path(tmp) / f"{k.op_name}.py"
            op_path.write_text(k.op_source)
            judged = str(k.evidence.timing_stats.regime or "cold")
            print(f"{k.summary.id} {k.op_name} ({judged})", flush=True)
            if a.isolated:
                print(f"  {'isolated':15s} {isolated(op_path, k.source, a.rounds * a.repeats)}", flush=True)
            print("\n".join(measure_kernel(bank, op_path, k.op_name, judged, a)), flush=True)


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "The workers' conditions added to a plain loop"))
