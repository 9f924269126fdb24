"""Bias add, tanh-approximated GELU, per-channel scale (an epilogue)."""

import torch

rows, cols = 1024, 3072


class Model(torch.nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(cols))
        self.scale = torch.nn.Parameter(torch.ones(cols))

    def forward(self, x):
        return torch.nn.functional.gelu(x + self.bias, approximate="tanh") * self.scale


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [cols]
