"""C++ building blocks the built-in coder puts into kernels (vectorisable under ``omp simd``): the
header, row writes and reductions, and the row-wise family's kernels. The float math the kernels
call (forge_exp, forge_erf...) is ``ops.cpp_math``'s; the C++ form of every op is in its record
(``ops.OPS``).
"""

HEADER = r"""
#include <cstdint>
#include <cstring>
#include <cmath>
#include <omp.h>
#ifdef __AVX__
#include <immintrin.h>
#endif
"""

# Writing a row: ``stream`` uses non-temporal stores (no read-for-ownership of the output lines,
# which a memory-bound kernel otherwise pays for); the values are still computed by a SIMD loop.
WRITE = r"""
template <class F>
static inline void forge_write(float* y, int64_t n, bool stream, F f, const float* pf = nullptr) {
#ifdef __AVX__
    if (stream && (((uintptr_t)y) & 31) == 0) {
        int64_t c = 0;
        // 64 values per block: an 8-wide block was unrolled into scalar code when f is an exp
        // (softmax recompute + stream ran 2x slower than without streaming).
        for (; c + 64 <= n; c += 64) {
            alignas(32) float tmp[64];
            #pragma omp simd
            for (int k = 0; k < 64; ++k) tmp[k] = f(c + k);
            for (int k = 0; k < 64; k += 8) _mm256_stream_ps(y + c + k, _mm256_load_ps(tmp + k));
            if (pf) for (int k = 0; k < 64; k += 16) __builtin_prefetch(pf + c + k, 0, 3);
        }
        for (; c < n; ++c) y[c] = f(c);
        return;
    }
#endif
    int64_t c = 0;
    if (pf) {  // pf: the next row's input, pulled into the cache while this row is written
        for (; c + 32 <= n; c += 32) {
            __builtin_prefetch(pf + c, 0, 3);
            __builtin_prefetch(pf + c + 16, 0, 3);
            #pragma omp simd
            for (int k = 0; k < 32; ++k) y[c + k] = f(c + k);
        }
    }
    #pragma omp simd
    for (int64_t i = c; i < n; ++i) y[i] = f(i);
}

static inline void forge_fence() {
#ifdef __AVX__
    _mm_sfence();  // streamed stores must be visible before the kernel returns
#endif
}
"""

# Row reductions with 32 independent partial results (four AVX vectors of floats): under a plain
# ``omp simd reduction`` every add waits for the previous one, and that chain, not memory, bounds
# a reduction over a cached row (softmax measured 1.3-1.45x faster with these). forge_max
# propagates NaN, as torch's max-based ops do.
REDUCE = r"""
// pf/pw, when given, are the next row's input and output, pulled into the cache (for reading,
// for writing) a block at a time while this row is summed.
template <class A, class F>
static inline A forge_sum(int64_t n, F f, const float* pf = nullptr, float* pw = nullptr) {
    A part[32] = {};
    int64_t c = 0;
    for (; c + 32 <= n; c += 32) {
        if (pf) { __builtin_prefetch(pf + c, 0, 3); __builtin_prefetch(pf + c + 16, 0, 3); }
        if (pw) { __builtin_prefetch(pw + c, 1, 3); __builtin_prefetch(pw + c + 16, 1, 3); }
        #pragma omp simd
        for (int k = 0; k < 32; ++k) part[k] += (A)f(c + k);
    }
    A s = 0;
    for (; c < n; ++c) s += (A)f(c);
    for (int k = 0; k < 32; ++k) s += part[k];
    return s;
}

// Sum and sum of squares in one pass, in double (E[x^2] - mean^2 cancels: float would not do).
template <class F> static inline void forge_moments(int64_t n, F f, double& s, double& q) {
    double ps[16] = {}, pq[16] = {};
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) {
        #pragma omp simd
        for (int k = 0; k < 16; ++k) { const double v = f(c + k); ps[k] += v; pq[k] += v * v; }
    }
    s = 0;
    q = 0;
    for (; c < n; ++c) { const double v = f(c); s += v; q += v * v; }
    for (int k = 0; k < 16; ++k) { s += ps[k]; q += pq[k]; }
}

// R rows reduced side by side. One row read from memory is one stream of cache-line fetches, and
// the hardware prefetcher restarts at every 4 KB page of it; R independent streams keep more
// fetches in flight (row sum of 2048x4096 on the 2-core EPYC VM, back-to-back C++ calls: median
// 1.09-1.49 ms with R = 1, 0.96-1.22 ms with R = 4, 10-18% less in each run; with the verifier's
// read flush before each call, taking turns with torch.sum in one process, R = 4-8 ran 1.2-1.3x
// faster than it: benchmarks/kernels/row_sum_bandwidth.py; on a slower day 1.06x). The verifier measures
// 1.00-1.11x, inside its noise floor (docs/timing.md, "How much is noise"): no gain forge can bank. Fewer partials per
// row as R grows keep the accumulator count near the 16 AVX registers (R = 8 in double spills).
// op(acc, value) folds one value in; init is its identity.
template <class A, int R, class Op>
static inline void forge_reduce_rows(const float* x, int64_t cols, A* out, A init, Op op) {
    constexpr int P = R >= 4 ? 8 : (R == 2 ? 16 : 32);
    A part[R][P];
    for (int s = 0; s < R; ++s)
        for (int k = 0; k < P; ++k) part[s][k] = init;
    int64_t c = 0;
    for (; c + P <= cols; c += P) {
        #pragma GCC unroll 8
        for (int s = 0; s < R; ++s) {
            #pragma omp simd
            for (int k = 0; k < P; ++k) part[s][k] = op(part[s][k], (A)x[s * cols + c + k]);
        }
    }
    for (int s = 0; s < R; ++s) {
        A t = init;
        for (int64_t i = c; i < cols; ++i) t = op(t, (A)x[s * cols + i]);
        for (int k = 0; k < P; ++k) t = op(t, part[s][k]);
        out[s] = t;
    }
}

template <class A, int R>
static inline void forge_sum_rows(const float* x, int64_t cols, A* out) {
    forge_reduce_rows<A, R>(x, cols, out, (A)0, [](A a, A v) { return a + v; });
}

// The maximum that propagates NaN, as torch's max-based ops do.
template <int R>
static inline void forge_max_rows(const float* x, int64_t cols, float* out) {
    forge_reduce_rows<float, R>(x, cols, out, -INFINITY, [](float m, float v) { return (v > m || v != v) ? v : m; });
}

static inline float forge_max(const float* x, int64_t n) {
    float m;
    forge_max_rows<1>(x, n, &m);
    return m;
}
"""

# The tuner's knobs for row-wise kernels (a config picks one value of each that applies).
ROW_DEFAULT = {
    "acc": "double",
    "stream": False,
    "threads": 0,
    "softmax": "store",
    "moments": "two_pass",
    "prefetch": True,
    "interleave": 4,
}


def _threads_clause(cfg: dict) -> str:
    """The OpenMP clause for the ``threads`` knob (0: all the runtime's threads)."""
    threads = int(cfg.get("threads") or 0)
    return f" num_threads({threads})" if threads > 0 else ""


def _kernel(body: str, cfg: dict, extra_args: str = "", tail: str = "", reduce: bool = False) -> str:
    """A row-wise kernel: OpenMP over rows; ``body`` sees ``xr`` (this row of x) and, unless the
    kernel reduces each row to one value ``y[r]``, ``yr`` (this row of y)."""
    head = f'extern "C" void kernel(const float* x{extra_args}, float* y, int64_t rows, int64_t cols{tail}) {{\n'
    loop = (
        f"    #pragma omp parallel for schedule(static){_threads_clause(cfg)}\n"
        "    for (int64_t r = 0; r < rows; ++r) {\n"
        "        const float* xr = x + r * cols;\n"
        + ("" if reduce else "        float* yr = y + r * cols;\n")
        # The next row (this thread's, except at the end of its share), for the passes that prefetch
        # it: a row is read from memory in its first pass and from cache after, so that pass's
        # memory traffic for the next row overlaps this row's arithmetic.
        + "        const float* xn = PREFETCH && r + 1 < rows ? xr + cols : nullptr;\n"
        + ("" if reduce else "        float* yn = PREFETCH && r + 1 < rows ? yr + cols : nullptr;\n")
    )
    fence = "" if reduce or not cfg.get("stream") else "    forge_fence();\n"
    return "\n" + head + loop + body + "    }\n" + fence + "}\n"


# The row maximum (NaN if the row has one, as torch.amax).
_ROW_MAX = "        const float m = forge_max(xr, cols);\n"
# The row sum in ACC (double: robust for long rows; float: twice the SIMD width).
_ROW_SUM = "        const ACC s = forge_sum<ACC>(cols, [&](int64_t c) { return xr[c]; });\n"
# The sum of exp(x - m), the max-shifted softmax denominator (writes exp to yr when asked); a NaN
# maximum makes every exp, the sum and so the whole row NaN, as in torch.
_EXP_SUM = (
    "        const float s = forge_sum<float>(cols, [&](int64_t c) {\n"
    "            float e = forge_exp(xr[c] - m); STORE return e; }NEXT);\n"
)
_WRITE_ROW = "        forge_write(yr, cols, STREAM, [&](int64_t c) {{ return {expr}; }}{next});\n"


def _write(expr: str, prefetch: bool = False) -> str:
    return _WRITE_ROW.format(expr=expr, next=", xn" if prefetch else "")


def _exp_sum(store: str, next_rows: str) -> str:
    """The exp-sum pass; ``next_rows`` (", xn" or ", xn, yn") prefetches the next row in it."""
    return _EXP_SUM.replace("STORE", store).replace("NEXT", next_rows)


def rowwise_cpp(kind: str, cfg: dict) -> str:
    """The C++ of one row-wise kernel under config ``cfg`` (see ROW_DEFAULT)."""
    cfg = {**ROW_DEFAULT, **cfg}
    if kind == "softmax" and cfg["softmax"] == "store":
        body = (
            _ROW_MAX
            + _exp_sum("yr[c] = e;", ", xn, yn")
            + "        const float inv = 1.0f / s;\n"
            + _write("yr[c] * inv")
        )
    elif kind == "softmax":  # recompute exp in the write pass: x is read three times, y written once
        body = _ROW_MAX + _exp_sum("", ", xn") + "        const float inv = 1.0f / s;\n"
        body += _write("forge_exp(xr[c] - m) * inv")
    elif kind == "log_softmax":
        body = _ROW_MAX + _exp_sum("", ", xn, yn") + "        const float lse = m + std::log(s);\n"
        body += _write("xr[c] - lse")
    elif kind == "layernorm" and cfg["moments"] == "one_pass":  # the row is read twice, not three times
        body = """        double s, q;
        forge_moments(cols, [&](int64_t c) { return xr[c]; }, s, q);
        const double md = s / (double)cols;
        const double var = q / (double)cols - md * md;
        const float mean = (float)md;
        const float rstd = (float)(1.0 / std::sqrt((var < 0.0 ? 0.0 : var) + eps));  // NaN stays NaN
""" + _write("(xr[c] - mean) * rstd * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f)", prefetch=True)
        return _finish(_kernel(body, cfg, ", const float* w, const float* b", ", double eps"), cfg)
    elif kind == "layernorm":
        body = (
            _ROW_SUM
            + """        const float mean = (float)(s / (ACC)cols);
        const ACC v = forge_sum<ACC>(cols, [&](int64_t c) { float d = xr[c] - mean; return d * d; }, xn, yn);
        const float rstd = (float)(1.0 / std::sqrt((double)v / (double)cols + eps));
"""
            + _write("(xr[c] - mean) * rstd * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f)")
        )
        return _finish(_kernel(body, cfg, ", const float* w, const float* b", ", double eps"), cfg)
    elif kind == "rmsnorm":
        body = """        const ACC acc = forge_sum<ACC>(cols, [&](int64_t c) { return xr[c] * xr[c]; });
        const float inv = (float)(1.0 / std::sqrt((double)acc / (double)cols + eps));
""" + _write("xr[c] * inv * (w ? w[c] : 1.0f)", prefetch=True)
        return _finish(_kernel(body, cfg, ", const float* w", ", double eps"), cfg)
    elif kind in ("sum", "mean", "amax"):
        return _finish(_interleaved_kernel(kind, int(cfg["interleave"]), cfg), cfg)
    elif kind == "logsumexp":  # an infinite maximum decides the result alone (inf - inf is NaN)
        body = _ROW_MAX + _exp_sum("", ", xn")
        body += "        y[r] = std::isinf(m) ? m : m + std::log(s);\n"
        return _finish(_kernel(body, cfg, reduce=True), cfg)
    else:
        raise KeyError(kind)
    return _finish(_kernel(body, cfg), cfg)


def _interleaved_kernel(kind: str, rows_at_once: int, cfg: dict) -> str:
    """A one-pass row reduction (sum, mean, amax) over ``rows_at_once`` rows side by side; the
    rows past the last whole block are reduced one at a time."""
    if rows_at_once not in (1, 2, 4, 8):
        raise ValueError(f"interleave must be 1, 2, 4 or 8, not {rows_at_once}")
    if kind == "amax":
        acc, reduce = "float", "forge_max_rows<{n}>"
    else:
        acc, reduce = "ACC", "forge_sum_rows<ACC, {n}>"

    def result(v: str) -> str:
        return {"amax": v, "sum": f"(float){v}", "mean": f"(float)({v} / (ACC)cols)"}[kind]

    return f"""
extern "C" void kernel(const float* x, float* y, int64_t rows, int64_t cols) {{
    const int64_t blocks = (rows + {rows_at_once} - 1) / {rows_at_once};
    #pragma omp parallel for schedule(static){_threads_clause(cfg)}
    for (int64_t b = 0; b < blocks; ++b) {{
        const int64_t r0 = b * {rows_at_once};
        if (r0 + {rows_at_once} <= rows) {{
            {acc} v[{rows_at_once}];
            {reduce.format(n=rows_at_once)}(x + r0 * cols, cols, v);
            for (int i = 0; i < {rows_at_once}; ++i) y[r0 + i] = {result("v[i]")};
        }} else {{
            for (int64_t r = r0; r < rows; ++r) {{
                {acc} v;
                {reduce.format(n=1)}(x + r * cols, cols, &v);
                y[r] = {result("v")};
            }}
        }}
    }}
}}
"""


def _finish(src: str, cfg: dict) -> str:
    acc = "double" if cfg["acc"] == "double" else "float"
    src = src.replace("ACC", acc).replace("STREAM", "true" if cfg["stream"] else "false")
    return src.replace("PREFETCH", "true" if cfg["prefetch"] else "false")


ROW_KINDS = ("softmax", "log_softmax", "logsumexp", "layernorm", "rmsnorm", "sum", "mean", "amax")
