"""A chain of pointwise ops over 1M elements, with a per-channel weight: eager runs about ten
kernels forward and twice that backward, a fused kernel one pass each way, so the fused training
step wins by far more than a noisy machine's drift (the training kernels' bank test)."""

import torch
from torch import nn

batch, length, channels = 16, 128, 512


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))

    def forward(self, x, gate):
        h = torch.tanh(x * self.weight)
        return h * torch.sigmoid(gate) + 0.5 * torch.exp(-h * h) * gate


def get_inputs():
    return [torch.randn(batch, length, channels), torch.randn(batch, length, channels)]


def get_init_inputs():
    return [channels]
