"""A small softmax for the verifier's tests (fast on any CPU)."""

import torch
import torch.nn as nn

batch_size = 32
dim = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
