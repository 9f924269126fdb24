"""Row sum of 2048x4096 fp32 (examples/ops/row_sum.py): torch.sum against the built-in coder's
C++ reduction with R rows side by side, under two cache flushes.

- ``read``: the verifier's flush. A buffer twice the LLC is read before each call, which also
  writes back the dirty lines the last call left, so the call starts with a clean cache.
- ``write``: a buffer twice the LLC is written instead; the call then pays for writing those
  dirty lines back while it reads its own input (a harness that flushed this way would time it).

Each call gets an input set it has not seen since the last flush (six sets cycled, 192 MB in all);
the kernels take turns call by call.
Prints median and quartiles per kernel and flush, and the read bandwidth at the median. Usage:
    python -m benchmarks.kernels.row_sum_bandwidth [--trials N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from benchmarks.support.page import add_page_option, run_with_page
from forge import cpp
from forge.agents.builtin.cpp_snippets import HEADER, REDUCE
from forge.verifier.machine.facts import cpu_flush_bytes

ROWS, COLS, SETS = 2048, 4096, 6
SIDE_BY_SIDE = (1, 2, 4, 8, 16)


def kernels() -> cpp.CppLibrary:
    body = "".join(
        f"""
extern "C" void sum_r{r}(const float* x, float* y, int64_t rows, int64_t cols) {{
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < rows / {r}; ++b) {{
        float v[{r}];
        forge_sum_rows<float, {r}>(x + b * {r} * cols, cols, v);
        for (int i = 0; i < {r}; ++i) y[b * {r} + i] = v[i];
    }}
}}
"""
        for r in SIDE_BY_SIDE
    )
    return cpp.load(HEADER + REDUCE + body)


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=4)
    return q[0], q[1], q[2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=60)
    add_page_option(ap)
    a = ap.parse_args()
    lib = kernels()
    xs = [torch.randn(ROWS, COLS) for _ in range(SETS)]
    y = torch.empty(ROWS)
    buf = torch.ones(cpu_flush_bytes() // 4)
    flushes = {"read": buf.sum, "write": lambda: buf.fill_(1.0)}
    calls: dict[str, Callable[[torch.Tensor], object]] = {"torch.sum": lambda x: torch.sum(x, 1)}

    def ours(fn: Callable[..., object]) -> Callable[[torch.Tensor], object]:
        return lambda x: fn(x, y, ROWS, COLS)

    for r in SIDE_BY_SIDE:
        calls[f"R = {r}"] = ours(getattr(lib, f"sum_r{r}"))
    for name, call in calls.items():  # correctness first: a fast wrong kernel proves nothing
        call(xs[0])
        if name != "torch.sum":
            torch.testing.assert_close(y, torch.sum(xs[0], 1), rtol=1e-4, atol=1e-3)
    print(f"threads {torch.get_num_threads()}, {a.trials} calls per kernel and flush, {ROWS * COLS * 4 >> 20} MiB read")
    print(f"{'flush':6s} {'kernel':10s} {'q1 ms':>7s} {'median':>7s} {'q3 ms':>7s} {'GB/s':>6s}")
    for fname, flush in flushes.items():
        ts: dict[str, list[float]] = {name: [] for name in calls}
        for i in range(a.trials):  # the kernels take turns, so a slow spell of the VM hits them all
            for k, (name, call) in enumerate(calls.items()):
                x = xs[(i + k) % SETS]
                flush()
                t0 = time.perf_counter_ns()
                call(x)
                ts[name].append((time.perf_counter_ns() - t0) / 1e6)
        for name, series in ts.items():
            q1, med, q3 = quartiles(series)
            print(f"{fname:6s} {name:10s} {q1:7.3f} {med:7.3f} {q3:7.3f} {ROWS * COLS * 4 / med / 1e6:6.1f}")


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Row sums: torch.sum against rows reduced side by side"))
