"""A test model whose one class a fused kernel beats by construction: two instances of a chain of
thirteen elementwise steps (one pass over memory where eager makes thirteen), built alike, so a
model run carves them as one op and banks its kernel for both."""

import torch
from torch import nn

rows, width = 512, 1024


class Chain(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        y = x * self.weight
        for _ in range(12):
            y = y * 0.75 + 0.25
        return torch.tanh(y) + x


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.first = Chain(dim)
        self.second = Chain(dim)

    def forward(self, x):
        return self.second(self.first(x))


def get_inputs():
    return [torch.randn(rows, width)]


def get_init_inputs():
    return [width]
