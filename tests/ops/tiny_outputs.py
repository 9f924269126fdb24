"""An op whose outputs are tiny (about 1e-5): zeros are within the default absolute tolerance
(1e-4) of every element, so only a comparison at the outputs' own scale tells them apart."""

import torch
import torch.nn as nn

batch_size = 32
dim = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x) * 1e-5


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
