"""A gate and a per-channel scale: y = x * sigmoid(gate) * weight. Two inputs and a parameter, each
with a gradient of its own (the gradient checks' op)."""

import torch
from torch import nn

batch, length, channels = 4, 24, 16


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))

    def forward(self, x, gate):
        return x * torch.sigmoid(gate) * self.weight


def get_inputs():
    return [torch.randn(batch, length, channels), torch.randn(batch, length, channels)]


def get_init_inputs():
    return [channels]
