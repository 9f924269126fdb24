"""Verify every shipped example candidate against its op and print one row each.

Usage: python -m benchmarks.kernels.verify_examples [--no-compile-baseline]
Columns: status, candidate / eager / torch.compile median (ms), speedups, fraction of the
roofline estimate, seconds the verification took.
"""

from __future__ import annotations

import argparse

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.core.settings import load_settings
from forge.verifier import verify

PAIRS = [
    ("scale_bias_gelu", "scale_bias_gelu_cpp"),
    ("softmax", "softmax_torch"),
    ("layernorm", "layernorm_cpp"),
    ("rmsnorm", "rmsnorm_cpp"),
    ("row_sum", "rowsum_torch"),
    ("linear_gelu", "linear_gelu_cpp"),
]


def fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-compile-baseline", action="store_true")
    add_page_option(ap)
    a = ap.parse_args()
    settings = load_settings(compile_baseline=not a.no_compile_baseline)
    print(
        f"{'op':16s} {'candidate':22s} {'status':10s} {'cand ms':>8s} {'eager ms':>8s} {'compile ms':>10s} "
        f"{'x eager':>7s} {'x compile':>9s} {'roofline':>8s} {'secs':>5s}"
    )
    for op, cand in PAIRS:
        v = verify(ROOT / "examples/ops" / f"{op}.py", ROOT / "examples/candidates" / f"{cand}.py", settings)
        t = v.timings_ms
        roof = v.roofline.fraction_candidate if v.roofline else None
        print(
            f"{op:16s} {cand:22s} {v.status!s:10s} {fmt(t.candidate, '8.3f')} {fmt(t.eager, '8.3f')} "
            f"{fmt(t.compile, '10.3f')} {fmt(v.speedup_vs_eager, '7.2f')} {fmt(v.speedup_vs_compile, '9.2f')} "
            f"{fmt(roof, '8.0%')} {v.elapsed_s:5.1f}",
            flush=True,
        )


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Every shipped example candidate verified"))
