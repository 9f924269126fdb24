"""The gated scale of gated_scale.py at a size where a fused kernel pays: y = x * sigmoid(gate) *
weight over 1M elements (the training kernels' bank test)."""

import torch
from torch import nn

batch, length, channels = 16, 128, 512


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
