"""Leaky ReLU then hardtanh (a chain of clamps)."""

import torch

size = 1 << 22


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.hardtanh(torch.nn.functional.leaky_relu(x, 0.2), -0.5, 0.5)


def get_inputs():
    return [torch.randn(size)]


def get_init_inputs():
    return []
