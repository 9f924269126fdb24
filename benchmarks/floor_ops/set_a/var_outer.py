"""Unbiased variance over the outer (first) dim: one figure per column."""

import torch

rows, cols = 2048, 1024


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.var(x, dim=0)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
