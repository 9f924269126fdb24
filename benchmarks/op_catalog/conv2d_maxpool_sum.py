"""conv: Conv2d + MaxPool + sum (a fused-operator problem)."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(32, 64, 3, padding=1)

    def forward(self, x):
        return torch.nn.functional.max_pool2d(self.conv(x), 2).sum(dim=(2, 3))


def get_inputs():
    return [torch.randn(8, 32, 32, 32)]


def get_init_inputs():
    return []
