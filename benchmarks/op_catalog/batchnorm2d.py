"""norm: BatchNorm2d (training mode: batch statistics, running stats updated)."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(32)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(16, 32, 64, 64)]


def get_init_inputs():
    return []
