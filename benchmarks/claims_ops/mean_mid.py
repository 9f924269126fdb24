"""Mean over the middle dim of a 3-D tensor."""

import torch

a, b, c = 64, 256, 256


class Model(torch.nn.Module):
    def forward(self, x):
        return x.mean(dim=1)


def get_inputs():
    return [torch.randn(a, b, c)]


def get_init_inputs():
    return []
