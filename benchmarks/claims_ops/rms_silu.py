"""Row RMS norm with a weight, then SiLU (a norm with an elementwise epilogue)."""

import torch

rows, cols = 4096, 768


class Model(torch.nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(cols))

    def forward(self, x):
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return torch.nn.functional.silu(y)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [cols]
