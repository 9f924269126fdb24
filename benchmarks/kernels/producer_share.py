"""How much of eager's time goes to library producers (mm, addmm, bmm, convolution, SDPA): the
ceiling on what fusing everything else can buy.

The built-in agent's general lowering keeps a library producer as a library call and fuses the
ops around it. If the producer takes a share s of eager's time, a kernel that made every other
op free would run at most 1 / s times faster than eager (Amdahl). An op whose ceiling sits inside
the verifier's noise (the null test's spread, about +-8% on a 2-core VM, docs/timing.md "How much
is noise") cannot be accepted whatever the lowering emits, and its no_gain is the honest result.

Per op: eager's median time per call (back-to-back calls, ``--calls`` of them after a warm-up),
the producers' share of the profiled time (the outermost producer events of torch.profiler,
children included, over the top-level events), and the ceiling 1 / share.
Usage: python -m benchmarks.kernels.producer_share DIR [DIR ...] [--every N] [--calls N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.autograd.profiler_util import FunctionEvent

from benchmarks.support.page import add_page_option, run_with_page
from forge.core.problem import load_problem

# torch.profiler's names for the producers the lowering keeps as library calls (schedule.LIBRARY_OPS),
# the functional entry points included, so that the outermost one counts once with its children.
PRODUCERS = frozenset(
    {
        "aten::linear",
        "aten::matmul",
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::conv_transpose1d",
        "aten::conv_transpose2d",
        "aten::conv_transpose3d",
        "aten::convolution",
        "aten::_convolution",
        "aten::scaled_dot_product_attention",
    }
)


def _outermost(event: FunctionEvent) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name in PRODUCERS:
            return False
        parent = parent.cpu_parent
    return True


@contextlib.contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """The profiler's native layer writes a line to fd 2 at every start and stop: not the table's."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def producer_share(model: torch.nn.Module, inputs: list[Any], calls: int) -> float:
    """The producers' share of eager's profiled time over ``calls`` calls."""
    with _quiet_native_stderr(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            model(*inputs)
    events = list(prof.events())
    top = sum(e.cpu_time_total for e in events if e.cpu_parent is None)
    made = sum(e.cpu_time_total for e in events if e.name in PRODUCERS and _outermost(e))
    return made / top if top else 0.0


def eager_ms(model: torch.nn.Module, inputs: list[Any], calls: int) -> float:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        model(*inputs)
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(times)


def measure(path: Path, calls: int) -> tuple[float, float]:
    problem = load_problem(path)
    torch.manual_seed(0)
    model = problem.model_cls(*problem.init_inputs()).eval()
    inputs = problem.inputs()
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        ms = eager_ms(model, inputs, calls)
        share = producer_share(model, inputs, calls)
    return ms, share


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--every", type=int, default=1, help="take every Nth op (the sample coverage.py takes)")
    ap.add_argument("--calls", type=int, default=20)
    add_page_option(ap)
    a = ap.parse_args()
    paths = sorted(p for d in a.dirs for p in d.glob("*.py") if not p.name.startswith("_"))[:: a.every]
    ceilings: list[float] = []
    print(f"{'op':60s} {'eager ms':>9s} {'producers':>9s} {'ceiling':>8s}")
    for path in paths:
        try:
            ms, share = measure(path, a.calls)
        except Exception as exc:  # a fetched benchmark's op that does not load at these sizes
            print(f"{path.stem:60s} could not run: {type(exc).__name__}: {str(exc)[:60]}")
            continue
        ceiling = 1.0 / share if share > 0 else float("inf")
        ceilings.append(ceiling)
        print(f"{path.stem:60s} {ms:9.3f} {share:9.0%} {ceiling:7.2f}x", flush=True)
    if ceilings:
        low = sum(c < 1.08 for c in ceilings)
        print(
            f"\n{len(ceilings)} ops; ceiling under 1.08x (inside the noise): {low}; "
            f"median ceiling {statistics.median(ceilings):.2f}x"
        )


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Library producers' share of an op's time"))
