"""The same forge.cpp RMSNorm in KernelBench's form: a standalone ``ModelNew(nn.Module)`` with the
reference's constructor arguments and parameter names (it does not subclass the user's class).
``bank.kernelize`` runs its ``forward`` on the user's own RMSNorm instances, with their weights."""

import torch
import torch.nn as nn

from forge import cpp

_lib = cpp.load(r"""
#include <cstdint>
#include <cmath>
extern "C" void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, double eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float acc = 0.f;
        #pragma omp simd reduction(+:acc)
        for (int64_t c = 0; c < cols; ++c) acc += xr[c] * xr[c];
        const float inv = 1.0f / std::sqrt(acc / (float)cols + (float)eps);
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        _lib.rmsnorm(x, self.weight.detach().contiguous(), y, x.numel() // cols, cols, float(self.eps))
        return y
