"""A long chain of pointwise ops on a 4 MB tensor: eager reads and writes memory once per op, a
fused kernel once in all, so a fused kernel wins by a margin no timing noise of a shared machine
hides (~8x on a 2-core CPU; for tests of what the engine does with a kernel that clearly beats
eager). At 16 MB it won by ~13x and a one-round session took 4x as long."""

import torch
import torch.nn as nn

rows = 1024
cols = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x * 1.5 + 0.25
        y = torch.relu(y) - 0.5 * x
        y = y * y + x
        y = torch.abs(y) * 0.75 + 1.0
        y = torch.sqrt(y) - x * 0.125
        return torch.maximum(y, x) * 2.0 - 1.0


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
