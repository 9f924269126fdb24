"""A small LayerNorm (module form) for the built-in coder's tests."""

import torch
import torch.nn as nn

batch_size = 32
hidden = 384


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden]
