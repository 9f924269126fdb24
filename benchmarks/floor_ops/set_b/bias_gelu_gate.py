"""A bias, a sigmoid-approximated GELU (x * sigmoid(1.702 x)) and a scale: a pointwise chain."""

import torch

rows, cols = 2048, 1536


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(cols) * 0.1)

    def forward(self, x):
        y = x + self.bias
        return y * torch.sigmoid(1.702 * y) * 0.75


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
