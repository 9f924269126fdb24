"""GLU: the first half of the last dim gated by the sigmoid of the second."""

import torch

rows, cols = 2048, 2048


class Model(torch.nn.Module):
    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return a * torch.sigmoid(b)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
