"""What the verifier harness itself costs, end to end, on this machine.

Prints:
  * seconds for `forge verify` (a fresh CLI process) on a trivial correct candidate, cold (empty
    cache: machine figures measured) and warm, without the torch.compile baseline;
  * the same with the compile baseline, warm (inductor's own cache may be warm or cold);
  * forge.cpp compile time for a small OpenMP kernel, cold (new source each time) and cached.

Usage: python -m benchmarks.costs.harness_cost [--runs N] [--with-compile]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT

CASES = [
    ("examples/ops/row_sum.py", "examples/candidates/rowsum_torch.py"),
    ("examples/ops/softmax.py", "examples/candidates/softmax_torch.py"),
]
KERNEL = r"""
#include <cstdint>
#include <cmath>
extern "C" void k(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]) * 0.5f;
}
"""


def verify_seconds(op: str, cand: str, cache: str, compile_baseline: bool) -> float:
    args = [sys.executable, "-m", "forge", "verify", op, cand, "--json"]
    if not compile_baseline:
        args.append("--no-compile-baseline")
    t0 = time.perf_counter()
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "FORGE_CACHE_DIR": cache})
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"verify failed ({r.returncode}): {r.stdout[-500:]} {r.stderr[-500:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--with-compile", action="store_true", help="also time runs with the torch.compile baseline")
    add_page_option(ap)
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    for op, cand in CASES:
        with tempfile.TemporaryDirectory() as cache:
            cold = verify_seconds(op, cand, cache, False)
            warm = [verify_seconds(op, cand, cache, False) for _ in range(a.runs)]
            med = statistics.median(warm)
            line = f"verify {Path(op).stem:10s} no compile baseline: cold {cold:5.2f} s, warm median {med:5.2f} s"
            if a.with_compile:
                comp = [verify_seconds(op, cand, cache, True) for _ in range(2)]
                line += f" | with compile baseline: first {comp[0]:5.2f} s, second {comp[1]:5.2f} s"
            print(line, flush=True)

    with tempfile.TemporaryDirectory() as cache:
        os.environ["FORGE_CACHE_DIR"] = cache
        from forge import cpp

        cold_times, cached_times = [], []
        for i in range(max(a.runs, 5)):
            src = KERNEL + f"\n// variant {i} {time.time_ns()}\n"
            t0 = time.perf_counter()
            cpp.build(src)
            cold_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            cpp.build(src)
            cached_times.append(time.perf_counter() - t0)
        print(
            f"forge.cpp compile: cold median {statistics.median(cold_times):.3f} s (max {max(cold_times):.3f} s), "
            f"cached median {statistics.median(cached_times) * 1e3:.3f} ms"
        )


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "What the harness itself costs"))
