"""pooling: MaxPool1d(4, stride 2)."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.nn.functional.max_pool1d(x, 4, 2)


def get_inputs():
    return [torch.randn(64, 256, 128)]


def get_init_inputs():
    return []
