"""norm: GroupNorm(8 groups, 32 channels)."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.GroupNorm(8, 32)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(16, 32, 64, 64)]


def get_init_inputs():
    return []
