"""A stack of MLP blocks (Linear, GELU, Linear, residual) in the op format, for real plan runs."""

import torch
from torch import nn

batch, width, hidden, depth = 8, 64, 256, 3


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.fc2(nn.functional.gelu(self.fc1(x)))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(depth))
        self.out = nn.Linear(width, 10)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def get_inputs():
    return [torch.randn(batch, 4, width)]


def get_init_inputs():
    return []
