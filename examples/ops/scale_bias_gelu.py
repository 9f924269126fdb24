"""Pointwise chain with per-channel parameters: y = gelu(x * scale[c] + bias[c]) clamped."""

import torch
import torch.nn as nn

batch_size = 16
channels = 64
height = 64
width = 64


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels, 1, 1))
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.scale + self.bias
        y = torch.nn.functional.gelu(y)
        return torch.clamp(y, min=-1.0, max=4.0)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
