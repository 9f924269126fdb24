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

# The row maximum, NaN-aware (a NaN anywhere makes the maximum NaN, as torch.amax does).
_ROW_MAX = r"""
        float m = -INFINITY;
        bool nan = false;
        #pragma omp simd reduction(max:m) reduction(|:nan)
        for (int64_t c = 0; c < cols; ++c) { m = xr[c] > m ? xr[c] : m; nan |= xr[c] != xr[c]; }
"""

ROWWISE = {
    "softmax": r"""
extern "C" void kernel(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
"""
    + _ROW_MAX
    + r"""        if (nan) m = NAN;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) { float e = forge_exp(xr[c] - m); yr[c] = e; s += e; }
        const float inv = 1.0f / s;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
""",
    "log_softmax": r"""
extern "C" void kernel(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
"""
    + _ROW_MAX
    + r"""        if (nan) m = NAN;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += forge_exp(xr[c] - m);
        const float lse = m + std::log(s);
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - lse;
    }
}
""",
    "layernorm": r"""
extern "C" void kernel(const float* x, const float* w, const float* b, float* y,
                       int64_t rows, int64_t cols, double eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += xr[c];
        const float mean = (float)(s / (double)cols);
        double v = 0.0;
        #pragma omp simd reduction(+:v)
        for (int64_t c = 0; c < cols; ++c) { float d = xr[c] - mean; v += d * d; }
        const float rstd = (float)(1.0 / std::sqrt(v / (double)cols + eps));
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * rstd * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f);
    }
}
""",
    "rmsnorm": r"""
extern "C" void kernel(const float* x, const float* w, float* y, int64_t rows, int64_t cols, double eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        double acc = 0.0;
        #pragma omp simd reduction(+:acc)
        for (int64_t c = 0; c < cols; ++c) acc += xr[c] * xr[c];
        const float inv = (float)(1.0 / std::sqrt(acc / (double)cols + eps));
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * (w ? w[c] : 1.0f);
    }
}
""",
    "sum": r"""
extern "C" void kernel(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += xr[c];
        y[r] = (float)s;
    }
}
""",
    "mean": r"""
extern "C" void kernel(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += xr[c];
        y[r] = (float)(s / (double)cols);
    }
}
""",
    "amax": r"""
extern "C" void kernel(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
"""
    + _ROW_MAX
    + r"""        y[r] = nan ? NAN : m;
    }
}
""",
}
