"""pooling: MaxPool2d(2)."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.nn.functional.max_pool2d(x, 2)


def get_inputs():
    return [torch.randn(16, 32, 64, 64)]


def get_init_inputs():
    return []
