"""pooling: AvgPool2d(3, stride 2, padding 1)."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.nn.functional.avg_pool2d(x, 3, 2, 1)


def get_inputs():
    return [torch.randn(16, 32, 64, 64)]


def get_init_inputs():
    return []
