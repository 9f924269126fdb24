"""Per-channel scale and bias followed by ReLU, with parameters (tests weight handling)."""

import torch
import torch.nn as nn

batch_size = 8
channels = 16
length = 64


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels, 1))
        self.bias = nn.Parameter(torch.randn(channels, 1))

    def forward(self, x):
        return torch.relu(x * self.scale + self.bias)


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [channels]
