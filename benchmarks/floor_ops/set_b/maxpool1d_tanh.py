"""1-D max pool (window 4, stride 2) over a sequence, then tanh."""

import torch

n, c, length = 16, 64, 2048


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(torch.nn.functional.max_pool1d(x, kernel_size=4, stride=2))


def get_inputs():
    return [torch.randn(n, c, length)]


def get_init_inputs():
    return []
