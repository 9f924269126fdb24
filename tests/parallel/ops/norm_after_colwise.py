"""Linear -> LayerNorm -> Linear: a plan that shards the first Linear colwise and leaves its output
sharded normalises over a part of the hidden dimension (statically fine, numerically wrong)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.norm, self.down = nn.Linear(32, 64), nn.LayerNorm(64), nn.Linear(64, 32)

    def forward(self, x):
        return self.down(self.norm(self.up(x)))


def get_inputs():
    return [torch.randn(4, 8, 32)]


def get_init_inputs():
    return []
