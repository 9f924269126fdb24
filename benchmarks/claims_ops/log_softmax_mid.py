"""log_softmax over the middle dim of a 3-D tensor."""

import torch

a, b, c = 32, 128, 96


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(a, b, c)]


def get_init_inputs():
    return []
