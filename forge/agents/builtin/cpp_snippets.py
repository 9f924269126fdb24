"""C++ building blocks the built-in coder puts into kernels (vectorisable under ``omp simd``)."""

# exp for floats, vectorisable (std::exp is a scalar libm call): Cephes' range reduction and
# polynomial, relative error below 2e-7; NaN propagates, overflow gives inf, underflow 0.
FEXP = r"""
static inline float forge_exp(float x) {
    const float hi = 88.3762626647949f, lo = -87.3365478515625f;
    float xc = x > hi ? hi : (x < lo ? lo : x);
    float k = std::floor(xc * 1.44269504088896341f + 0.5f);
    float r = xc - k * 0.693359375f + k * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)k + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    float res = p * scale;
    res = x > hi ? INFINITY : res;
    return x < lo ? 0.0f : res;
}
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
template <class F> static inline void forge_write(float* y, int64_t n, bool stream, F f) {
#ifdef __AVX__
    if (stream && (((uintptr_t)y) & 31) == 0) {
        int64_t c = 0;
        for (; c + 8 <= n; c += 8) {
            alignas(32) float tmp[8];
            #pragma omp simd
            for (int k = 0; k < 8; ++k) tmp[k] = f(c + k);
            _mm256_stream_ps(y + c, _mm256_load_ps(tmp));
        }
        for (; c < n; ++c) y[c] = f(c);
        return;
    }
#endif
    #pragma omp simd
    for (int64_t c = 0; c < n; ++c) y[c] = f(c);
}

static inline void forge_fence() {
#ifdef __AVX__
    _mm_sfence();  // streamed stores must be visible before the kernel returns
#endif
}
"""

# The tuner's knobs for row-wise kernels (a config picks one value of each that applies).
ROW_DEFAULT = {"acc": "double", "stream": False, "threads": 0, "softmax": "store"}


def _kernel(body: str, cfg: dict, extra_args: str = "", tail: str = "", reduce: bool = False) -> str:
    """A row-wise kernel: OpenMP over rows; ``body`` sees ``xr`` (this row of x) and, unless the
    kernel reduces each row to one value ``y[r]``, ``yr`` (this row of y)."""
    head = f'extern "C" void kernel(const float* x{extra_args}, float* y, int64_t rows, int64_t cols{tail}) {{\n'
    threads = int(cfg.get("threads") or 0)
    clause = f" num_threads({threads})" if threads > 0 else ""
    loop = (
        f"    #pragma omp parallel for schedule(static){clause}\n"
        "    for (int64_t r = 0; r < rows; ++r) {\n"
        "        const float* xr = x + r * cols;\n" + ("" if reduce else "        float* yr = y + r * cols;\n")
    )
    fence = "" if reduce or not cfg.get("stream") else "    forge_fence();\n"
    return "\n" + head + loop + body + "    }\n" + fence + "}\n"


# The row maximum, NaN-aware (a NaN anywhere makes the maximum NaN, as torch.amax does).
_ROW_MAX = """        float m = -INFINITY;
        bool nan = false;
        #pragma omp simd reduction(max:m) reduction(|:nan)
        for (int64_t c = 0; c < cols; ++c) { m = xr[c] > m ? xr[c] : m; nan |= xr[c] != xr[c]; }
"""
# The row sum in ACC (double: robust for long rows; float: twice the SIMD width).
_ROW_SUM = """        ACC s = 0;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += xr[c];
"""
# The sum of exp(x - m), the max-shifted softmax denominator (writes exp to yr when asked).
_EXP_SUM = """        if (nan) m = NAN;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) { float e = forge_exp(xr[c] - m); STORE s += e; }
"""
_WRITE_ROW = "        forge_write(yr, cols, STREAM, [&](int64_t c) {{ return {expr}; }});\n"


def _write(expr: str) -> str:
    return _WRITE_ROW.format(expr=expr)


def rowwise_cpp(kind: str, cfg: dict) -> str:
    """The C++ of one row-wise kernel under config ``cfg`` (see ROW_DEFAULT)."""
    cfg = {**ROW_DEFAULT, **cfg}
    if kind == "softmax" and cfg["softmax"] == "store":
        body = (
            _ROW_MAX
            + _EXP_SUM.replace("STORE", "yr[c] = e;")
            + "        const float inv = 1.0f / s;\n"
            + _write("yr[c] * inv")
        )
    elif kind == "softmax":  # recompute exp in the write pass: x is read three times, y written once
        body = _ROW_MAX + _EXP_SUM.replace("STORE ", "") + "        const float inv = 1.0f / s;\n"
        body += _write("forge_exp(xr[c] - m) * inv")
    elif kind == "log_softmax":
        body = _ROW_MAX + _EXP_SUM.replace("STORE ", "") + "        const float lse = m + std::log(s);\n"
        body += _write("xr[c] - lse")
    elif kind == "layernorm":
        body = (
            _ROW_SUM
            + """        const float mean = (float)(s / (ACC)cols);
        ACC v = 0;
        #pragma omp simd reduction(+:v)
        for (int64_t c = 0; c < cols; ++c) { float d = xr[c] - mean; v += d * d; }
        const float rstd = (float)(1.0 / std::sqrt((double)v / (double)cols + eps));
"""
            + _write("(xr[c] - mean) * rstd * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f)")
        )
        return _finish(_kernel(body, cfg, ", const float* w, const float* b", ", double eps"), cfg)
    elif kind == "rmsnorm":
        body = """        ACC acc = 0;
        #pragma omp simd reduction(+:acc)
        for (int64_t c = 0; c < cols; ++c) acc += xr[c] * xr[c];
        const float inv = (float)(1.0 / std::sqrt((double)acc / (double)cols + eps));
""" + _write("xr[c] * inv * (w ? w[c] : 1.0f)")
        return _finish(_kernel(body, cfg, ", const float* w", ", double eps"), cfg)
    elif kind in ("sum", "mean"):
        div = "" if kind == "sum" else " / (ACC)cols"
        return _finish(_kernel(_ROW_SUM + f"        y[r] = (float)(s{div});\n", cfg, reduce=True), cfg)
    elif kind == "logsumexp":  # an infinite maximum decides the result alone (inf - inf is NaN)
        body = _ROW_MAX + _EXP_SUM.replace("STORE ", "")
        body += "        y[r] = (std::isinf(m) && !nan) ? m : m + std::log(s);\n"
        return _finish(_kernel(body, cfg, reduce=True), cfg)
    elif kind == "amax":
        return _finish(_kernel(_ROW_MAX + "        y[r] = nan ? NAN : m;\n", cfg, reduce=True), cfg)
    else:
        raise KeyError(kind)
    return _finish(_kernel(body, cfg), cfg)


def _finish(src: str, cfg: dict) -> str:
    acc = "double" if cfg["acc"] == "double" else "float"
    return src.replace("ACC", acc).replace("STREAM", "true" if cfg["stream"] else "false")


ROW_KINDS = ("softmax", "log_softmax", "logsumexp", "layernorm", "rmsnorm", "sum", "mean", "amax")
