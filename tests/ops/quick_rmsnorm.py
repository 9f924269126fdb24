"""The shipped RMSNorm at a quarter of its rows: the built-in kernel is ~2x eager from its first
attempt, and a session with one round verifies, confirms and null-controls it in ~12 s on a 2-core
CPU where the shipped size takes ~45 s. For tests that need an op a session banks; the shipped
example itself is run end to end by tests/cli/test_optimize.py."""

import torch
import torch.nn as nn

batch_size = 1024
hidden = 1024
eps = 1e-6


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden, eps]
