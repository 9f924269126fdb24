"""A row sum written slowly on purpose (a Python loop over rows): any vectorised candidate beats it
by far more than timing noise, which is what the search tests need."""

import torch
import torch.nn as nn

rows = 64
cols = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.stack([r.sum() for r in x])


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
