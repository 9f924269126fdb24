"""scan: reversed cumsum over dim 1."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return x.flip(1).cumsum(1).flip(1)


def get_inputs():
    return [torch.randn(1024, 512)]


def get_init_inputs():
    return []
