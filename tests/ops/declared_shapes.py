"""Row sums with declared shape variants and a custom tolerance."""

import torch
import torch.nn as nn

rows = 64
cols = 256

FORGE_NAME = "declared_rowsum"
FORGE_SHAPES = [{"rows": 3, "cols": 17}, {"rows": 128, "cols": 5}]
FORGE_TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
