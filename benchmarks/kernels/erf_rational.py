"""erf for the built-in coder's exact GELU (C++): check both forms, or derive the rational one again.

    python -m benchmarks.kernels.erf_rational          # both forms: error over every float, GELU error, speed
    python -m benchmarks.kernels.erf_rational --fit    # derive the rational form's coefficients (numpy, mpmath)

The shipped forms are ``forge.agents.builtin.ops.ERF``: "torch" (Abramowitz & Stegun 7.1.26
with an exp, ATen's formula) and "rational" (x * P(x^2) / Q(x^2), no exp). Both are odd functions
of x (the sign is applied last), so checking every non-negative float covers every float; past
4.5 both are exactly 1 (checked at a few points).

--fit: a weighted linear least-squares fit of erf(x) / x = P(u) / Q(u), u = x^2, on [0, 4] at
Chebyshev points, reweighted toward equal relative error (Lawson); then the numerator is scaled
down k ulp, k the smallest for which no float in [0, 3.9] (the form saturates beyond) evaluates
above 1 with the kernel's compiler flags.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import time

import torch

from benchmarks.support.page import add_page_option, run_with_page
from forge import cpp
from forge.agents.builtin.cpp_snippets import HEADER
from forge.agents.builtin.ops import ERF, CppMath, cpp_math_source
from forge.agents.builtin.ops import GELU as GELU_OP
from forge.agents.builtin.pointwise_expr import CPP

SATURATE = 3.9  # the rational form returns +-1 beyond this
CHECK_LIMIT = 0x40900000  # 4.5f: every float from 0 to here is checked

SCAN = r"""
// Every float from 0 to ``last`` (bit patterns): the largest |erf_f(x) - erf(x)| (erf in double),
// where it is, and how many values come out above 1.
extern "C" void scan(double* out, uint32_t last) {
    double worst = 0, at = 0, over = 0;
    const uint32_t block = 1u << 16;
    alignas(32) float xs[1u << 16], ys[1u << 16];
    for (uint64_t b0 = 0; b0 <= last; b0 += block) {
        uint32_t n = (uint32_t)(last - b0 + 1 < block ? last - b0 + 1 : block);
        for (uint32_t i = 0; i < n; ++i) { uint32_t b = (uint32_t)b0 + i; std::memcpy(&xs[i], &b, 4); }
        #pragma omp simd
        for (uint32_t i = 0; i < n; ++i) ys[i] = ERF_F(xs[i]);
        for (uint32_t i = 0; i < n; ++i) {
            double e = std::fabs((double)ys[i] - std::erf((double)xs[i]));
            if (e > worst) { worst = e; at = xs[i]; }
            over += ys[i] > 1.0f;
        }
    }
    out[0] = worst; out[1] = at; out[2] = over;
}
"""

GELU = r"""
extern "C" void gelu(const float* x, float* y, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = GELU_OF(x[i]);
}

// ns per element per core of the exact GELU on a cache-resident block, every core busy (each output is
// summed, and each repetition shifts the input, so no work can be dropped or hoisted)
extern "C" double gelu_speed(int64_t reps, float* sink) {
    const int64_t n = 1 << 14;
    static float x[1 << 14];
    for (int64_t i = 0; i < n; ++i) x[i] = (float)(i % 2000) * 0.006f - 6.0f;
    double t0 = omp_get_wtime();
    float total = 0;
    #pragma omp parallel reduction(+ : total)
    for (int64_t r = 0; r < reps; ++r) {
        const float shift = (float)(r & 7) * 1e-3f;
        #pragma omp simd reduction(+ : total)
        for (int64_t i = 0; i < n; ++i) total += GELU_OF(x[i] + shift);
    }
    *sink = total;
    return (omp_get_wtime() - t0) / (double)(reps * n) * 1e9;
}
"""


def _library(erf_source: str) -> cpp.CppLibrary:
    defines = f"#define ERF_F forge_erf\n#define GELU_OF(X) {CPP.forms[GELU_OP].format(a='(X)')}\n"
    return cpp.load(HEADER + cpp_math_source({CppMath.EXP, CppMath.TANH}) + erf_source + defines + SCAN + GELU)


def scan(lib: cpp.CppLibrary, last: int = CHECK_LIMIT) -> tuple[float, float, int]:
    out = torch.zeros(3, dtype=torch.float64)
    lib.scan(out, last)
    return float(out[0]), float(out[1]), int(out[2])


def check() -> None:
    x = torch.linspace(-12, 12, 4_000_001)
    exact = 0.5 * x.double() * (1 + torch.special.erf(x.double() / math.sqrt(2)))
    big = torch.tensor([6.5, 10.0, 1e10, 3e38, float("inf")])  # erf(x / sqrt 2) is 1 in float
    eager_err = float((torch.nn.functional.gelu(x).double() - exact).abs().max())
    print(f"threads: {os.cpu_count()} cores; eager GELU: max |error| {eager_err:.3g} on [-12, 12]")
    head = f"{'form':<10}{'erf max |error|':>17}{'at x':>10}{'above 1':>9}"
    print(head + f"{'GELU max |error|':>18}{'ns/elem per core':>18}")
    for form, source in ERF.items():
        lib = _library(source)
        t0 = time.perf_counter()
        worst, at, over = scan(lib)
        scanned = time.perf_counter() - t0
        y = torch.empty_like(x)
        lib.gelu(x, y, x.numel())
        gelu_err = float((y.double() - exact).abs().max())
        yb = torch.empty_like(big)
        lib.gelu(big, yb, big.numel())
        assert torch.equal(yb, big), f"{form}: GELU of large x is not x: {yb}"
        lib.gelu_speed.restype = ctypes.c_double
        sink = torch.zeros(1)
        lib.gelu_speed(200, sink)
        ns = lib.gelu_speed(4000, sink)
        print(f"{form:<10}{worst:>17.3g}{at:>10.4g}{over:>9}{gelu_err:>18.3g}{ns:>18.3f}   ({scanned:.0f} s scan)")


def fit() -> None:
    import mpmath  # torch's sympy brings it
    import numpy as np

    n, num, den = 8000, 5, 5
    k = np.arange(n)
    x = np.sort(2 + 2 * np.cos(np.pi * (k + 0.5) / n))
    f = np.array([float(mpmath.erf(mpmath.mpf(float(v))) / mpmath.mpf(float(v))) for v in x])
    u = x * x
    w, q_at = np.ones(n), np.ones(n)
    best = (math.inf, None, None)
    for _ in range(200):
        # P(u) - f * (Q(u) - 1) = f, each row weighted toward equal relative error
        powers_q = np.vander(u, den + 1, increasing=True)[:, 1:]
        a = np.hstack([np.vander(u, num + 1, increasing=True), -(f[:, None] * powers_q)])
        scale = (w / (f * q_at))[:, None]
        cols = np.abs(a).max(0)
        c = np.linalg.lstsq(a * scale / cols, f * scale[:, 0], rcond=None)[0] / cols
        p, q = c[: num + 1], np.concatenate([[1.0], c[num + 1 :]])
        q_at = np.polyval(q[::-1], u)
        err = (np.polyval(p[::-1], u) / q_at - f) / f
        if np.abs(err).max() < best[0]:
            best = (float(np.abs(err).max()), p, q)
        w = np.maximum(w * np.abs(err) ** 0.3, 1e-8)
        w /= w.max()
    rel, p, q = best
    print(f"fit: max relative error {rel:.3g} (in double)")
    last = int(np.array([SATURATE], dtype=np.float32).view(np.uint32)[0])
    for ulps in range(9):
        s = 1.0 - ulps * 2.0**-24
        pf = [float(np.float32(v * s)) for v in p]
        qf = [float(np.float32(v)) for v in q]

        def horner(cs: list[float]) -> str:
            nested = "".join(f" * u + {c!r}f)" for c in reversed(cs[:-1]))
            return "".join("(" for _ in cs[:-1]) + repr(cs[-1]) + "f" + nested

        source = (
            "static inline float forge_erf(float x) {\n    float u = x * x;\n"
            f"    float p = {horner(pf)};\n    float q = {horner(qf)};\n"
            "    return x * p / q;\n}\n"
        )
        worst, at, over = scan(_library(source), last)
        print(f"numerator scaled down {ulps} ulp: max |error| {worst:.3g} at {at:.4g}, {over} values above 1")
        if over == 0:
            print("P:", ", ".join(f"{v:.9e}" for v in pf))
            print("Q:", ", ".join(f"{v:.9e}" for v in qf[1:]))
            return
    raise SystemExit("no scaling up to 8 ulp keeps erf <= 1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="derive the rational form's coefficients again")
    add_page_option(parser)
    args = parser.parse_args()
    fit() if args.fit else check()


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "erf: torch's formula against forge's rational form"))
