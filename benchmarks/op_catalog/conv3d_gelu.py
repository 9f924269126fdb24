"""conv: Conv3d + GELU."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(8, 16, 3, padding=1)

    def forward(self, x):
        return torch.nn.functional.gelu(self.conv(x))


def get_inputs():
    return [torch.randn(4, 8, 16, 32, 32)]


def get_init_inputs():
    return []
