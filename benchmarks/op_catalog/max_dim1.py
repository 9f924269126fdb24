"""reduction: max over dim 1."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return x.max(dim=1).values


def get_inputs():
    return [torch.randn(64, 256, 128)]


def get_init_inputs():
    return []
