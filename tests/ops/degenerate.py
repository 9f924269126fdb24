"""A degenerate problem: the output is zero whatever the input."""

import torch
import torch.nn as nn

batch_size = 16
dim = 64


class Model(nn.Module):
    def forward(self, x):
        return x - x


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
