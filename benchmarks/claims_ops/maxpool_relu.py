"""3x3 max pool with stride 2, then ReLU."""

import torch

n, c, h, w = 8, 32, 64, 64


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(torch.nn.functional.max_pool2d(x, kernel_size=3, stride=2))


def get_inputs():
    return [torch.randn(n, c, h, w)]


def get_init_inputs():
    return []
