"""BatchNorm2d then ReLU: another op in training mode (batch statistics, running averages)."""

import torch

n, c, h, w = 16, 32, 28, 28


class Model(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(n, c, h, w)]


def get_init_inputs():
    return [c]
