"""conv: depthwise Conv2d + HardSwish."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(32, 32, 3, padding=1, groups=32)

    def forward(self, x):
        return torch.nn.functional.hardswish(self.conv(x))


def get_inputs():
    return [torch.randn(16, 32, 64, 64)]


def get_init_inputs():
    return []
