"""LayerNorm, two passes per row in registers, through forge.cpp (for examples/ops/layernorm.py)."""

import torch
from forge_reference import Model

from forge import cpp

SRC = r"""
#include <cstdint>
#include <cmath>
extern "C" void layernorm(const float* x, const float* w, const float* b, float* y,
                          int64_t rows, int64_t cols, double eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += xr[c];
        const float mean = s / (float)cols;
        float v = 0.f;
        #pragma omp simd reduction(+:v)
        for (int64_t c = 0; c < cols; ++c) { float d = xr[c] - mean; v += d * d; }
        const float rstd = 1.0f / std::sqrt(v / (float)cols + (float)eps);
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
    }
}
"""
_lib = cpp.load(SRC)


class ModelNew(Model):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        n = self.norm
        _lib.layernorm(x, n.weight.detach(), n.bias.detach(), y, x.numel() // cols, cols, float(n.eps))
        return y
