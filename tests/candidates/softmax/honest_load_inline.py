"""A KernelBench-style C++ kernel through torch.utils.cpp_extension.load_inline."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor softmax_rows(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    int64_t rows = xc.size(0), cols = xc.size(1);
    at::parallel_for(0, rows, 1, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            float m = -INFINITY;
            for (int64_t c = 0; c < cols; ++c) m = std::max(m, xp[r * cols + c]);
            double s = 0;
            for (int64_t c = 0; c < cols; ++c) { float v = std::exp(xp[r * cols + c] - m); yp[r * cols + c] = v; s += v; }
            for (int64_t c = 0; c < cols; ++c) yp[r * cols + c] = (float)(yp[r * cols + c] / s);
        }
    });
    return y;
}
"""
_ext = load_inline("forge_test_softmax_rows", cpp_sources=CPP, functions=["softmax_rows"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.softmax_rows(x)
