"""The built-in lowering's kernel for each op at both SIMD widths (the ``simd_width`` knob): 512-bit
vectors where the CPU has AVX-512 (GCC's ``prefer-vector-width=512``) against GCC's own choice
under ``-march=native`` (256-bit on such a CPU), beside eager, in one process.

    python -m benchmarks.kernels.simd_width benchmarks/floor_ops/set_a/mish_clamp.py ...

Each round times a few back-to-back calls of each side in turn (the order rotating), so drift
reaches every side alike; a side's figure is its median over the rounds, and the width's ratio is
the median of the rounds' 256-bit over 512-bit ratios with the rounds' 10th and 90th percentiles.
Outputs are checked against the reference first. An op whose math has no transcendental (the knob
is not offered there) is listed as such.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.support.page import add_page_option, run_with_page
from forge.agents.builtin.lowering import program
from forge.core.problem import load_problem
from forge.verifier.machine.facts import cpu_flags

ROUNDS, CALLS = 40, 5


def _candidate(problem_module: types.ModuleType, lowered: program.LoweredGraph, width: int, model: Any) -> Any:
    """The lowering's ModelNew at ``width``, its module state the reference's."""
    sys.modules["forge_reference"] = problem_module
    namespace: dict[str, Any] = {}
    exec(compile(program.render(lowered, {"simd_width": width}), f"<simd {width}>", "exec"), namespace)
    candidate = namespace["ModelNew"].__new__(namespace["ModelNew"])
    candidate.__dict__.update(model.__dict__)
    return candidate


def _round_ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    return (time.perf_counter() - start) / CALLS * 1e3


def _measure(sides: dict[str, Callable[[], Any]]) -> dict[str, list[float]]:
    names = list(sides)
    for fn in sides.values():  # built, warmed
        fn()
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(ROUNDS):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(_round_ms(sides[name]))
    return times


def one_op(path: Path) -> str:
    problem = load_problem(path)
    model = problem.build_model().eval()
    inputs = problem.inputs()
    lowered = program.analyze(model, inputs)
    if isinstance(lowered, str):
        return f"{path.stem:<18} not lowered: {lowered}"
    if "simd_width" not in lowered.knobs():
        return f"{path.stem:<18} no transcendental in its math: the knob is not offered"
    wide, narrow = (_candidate(problem.module, lowered, w, model) for w in (512, 256))
    with torch.no_grad():
        want = model(*inputs)
        for cand in (wide, narrow):
            torch.testing.assert_close(cand(*inputs), want, rtol=1e-4, atol=1e-4, equal_nan=True)
        sides = {"eager": model, "512": wide, "256": narrow}
        times = _measure({name: (lambda m=m: m(*inputs)) for name, m in sides.items()})
    ratios = sorted(n / w for n, w in zip(times["256"], times["512"], strict=True))
    low, high = ratios[len(ratios) // 10], ratios[-(len(ratios) // 10) - 1]
    med = {k: statistics.median(v) for k, v in times.items()}
    return (
        f"{path.stem:<18} {med['eager']:9.3f} {med['256']:9.3f} {med['512']:9.3f}   "
        f"{statistics.median(ratios):.2f}x ({low:.2f}-{high:.2f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ops", type=Path, nargs="+")
    add_page_option(parser)
    args = parser.parse_args()
    wide = "yes" if "avx512f" in cpu_flags() else "no (both widths compile to the same code)"
    print(f"AVX-512: {wide}; torch threads {torch.get_num_threads()}")
    print(f"{ROUNDS} rounds of {CALLS} calls a side, in-process medians (ms a call)\n")
    print(f"{'op':<18} {'eager':>9} {'256-bit':>9} {'512-bit':>9}   512-bit's speedup (10-90%)")
    for path in args.ops:
        print(one_op(path), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "The built-in lowering's SIMD width: 512-bit against 256-bit vectors"))
