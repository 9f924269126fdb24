"""matmul: batched matmul, scale, softmax."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, a, b):
        return torch.softmax(torch.bmm(a, b) * 0.125, dim=-1)


def get_inputs():
    return [torch.randn(32, 128, 64), torch.randn(32, 64, 128)]


def get_init_inputs():
    return []
