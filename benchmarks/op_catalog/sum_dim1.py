"""reduction: sum over dim 1 of 3."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return x.sum(dim=1)


def get_inputs():
    return [torch.randn(64, 256, 128)]


def get_init_inputs():
    return []
