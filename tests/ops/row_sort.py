"""Each row sorted: an op outside the built-in agent's lowering (aten.sort), which it refuses."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=1).values


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
