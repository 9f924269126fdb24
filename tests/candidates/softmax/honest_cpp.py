"""An OpenMP + SIMD softmax through forge's C++ helper (its thread pool persists: legitimate)."""

import torch
import torch.nn as nn

from forge import cpp

SRC = r"""
#include <cstdint>
#include <cmath>
#include <algorithm>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = std::max(m, xr[c]);
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) { float e = std::exp(xr[c] - m); yr[c] = e; s += e; }
        float inv = (float)(1.0 / s);
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
"""
_lib = cpp.load(SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.softmax_rows(x, y, x.shape[0], x.shape[1])
        return y
