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
"""


def _kernel(body: str, extra_args: str = "", tail: str = "", reduce: bool = False) -> str:
    """A row-wise kernel: OpenMP over rows; ``body`` sees ``xr`` (this row of x) and, unless the
    kernel reduces each row to one value ``y[r]``, ``yr`` (this row of y)."""
    head = f'extern "C" void kernel(const float* x{extra_args}, float* y, int64_t rows, int64_t cols{tail}) {{\n'
    loop = (
        "    #pragma omp parallel for schedule(static)\n"
        "    for (int64_t r = 0; r < rows; ++r) {\n"
        "        const float* xr = x + r * cols;\n" + ("" if reduce else "        float* yr = y + r * cols;\n")
    )
    return "\n" + head + loop + body + "    }\n}\n"


# The row maximum, NaN-aware (a NaN anywhere makes the maximum NaN, as torch.amax does).
_ROW_MAX = """        float m = -INFINITY;
        bool nan = false;
        #pragma omp simd reduction(max:m) reduction(|:nan)
        for (int64_t c = 0; c < cols; ++c) { m = xr[c] > m ? xr[c] : m; nan |= xr[c] != xr[c]; }
"""
# The row sum, accumulated in double (ordinary-sized rows stay within fp32 tolerance of torch).
_ROW_SUM = """        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += xr[c];
"""
# The sum of exp(x - m), the max-shifted softmax denominator (writes exp to yr when asked).
_EXP_SUM = """        if (nan) m = NAN;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) { float e = forge_exp(xr[c] - m); STORE s += e; }
"""


ROWWISE = {
    "softmax": _kernel(
        _ROW_MAX
        + _EXP_SUM.replace("STORE", "yr[c] = e;")
        + """        const float inv = 1.0f / s;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
"""
    ),
    "log_softmax": _kernel(
        _ROW_MAX
        + _EXP_SUM.replace("STORE ", "")
        + """        const float lse = m + std::log(s);
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - lse;
"""
    ),
    "layernorm": _kernel(
        _ROW_SUM
        + """        const float mean = (float)(s / (double)cols);
        double v = 0.0;
        #pragma omp simd reduction(+:v)
        for (int64_t c = 0; c < cols; ++c) { float d = xr[c] - mean; v += d * d; }
        const float rstd = (float)(1.0 / std::sqrt(v / (double)cols + eps));
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * rstd * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f);
""",
        extra_args=", const float* w, const float* b",
        tail=", double eps",
    ),
    "rmsnorm": _kernel(
        """        double acc = 0.0;
        #pragma omp simd reduction(+:acc)
        for (int64_t c = 0; c < cols; ++c) acc += xr[c] * xr[c];
        const float inv = (float)(1.0 / std::sqrt(acc / (double)cols + eps));
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * (w ? w[c] : 1.0f);
""",
        extra_args=", const float* w",
        tail=", double eps",
    ),
    "sum": _kernel(_ROW_SUM + "        y[r] = (float)s;\n", reduce=True),
    "mean": _kernel(_ROW_SUM + "        y[r] = (float)(s / (double)cols);\n", reduce=True),
    "amax": _kernel(_ROW_MAX + "        y[r] = nan ? NAN : m;\n", reduce=True),
}
