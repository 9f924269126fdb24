"""activation: HardSigmoid."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.nn.functional.hardsigmoid(x)


def get_inputs():
    return [torch.randn(1024, 512)]


def get_init_inputs():
    return []
