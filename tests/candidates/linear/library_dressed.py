"""A library matmul dressed up as a custom kernel: a Triton kernel is defined, never launched, and
the work is the same cuBLAS (or oneDNN) call the reference makes. Correct, and no faster."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):  # never launched
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=offs < M * K), mask=offs < M * N)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.linear(x)  # the reference's own call, to the same cuBLAS/oneDNN kernel
