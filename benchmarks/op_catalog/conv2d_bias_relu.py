"""conv: Conv2d + extra bias + ReLU."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.bias = torch.nn.Parameter(torch.randn(64, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(16, 32, 64, 64)]


def get_init_inputs():
    return []
