"""scan: cumprod over dim 1."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.cumprod(x, dim=1)


def get_inputs():
    return [torch.rand(256, 512) + 0.5]


def get_init_inputs():
    return []
