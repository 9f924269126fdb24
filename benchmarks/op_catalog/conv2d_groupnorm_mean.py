"""conv: Conv2d + GroupNorm + mean over channels (a fused-operator problem)."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.norm = torch.nn.GroupNorm(8, 64)

    def forward(self, x):
        return self.norm(self.conv(x)).mean(dim=1)


def get_inputs():
    return [torch.randn(8, 32, 32, 32)]


def get_init_inputs():
    return []
