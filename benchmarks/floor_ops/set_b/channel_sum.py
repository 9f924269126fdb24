"""A per-channel sum over batch and length of an (N, C, L) tensor: reductions over outer and inner dims."""

import torch

n, c, length = 32, 128, 512


class Model(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=(0, 2))


def get_inputs():
    return [torch.randn(n, c, length)]


def get_init_inputs():
    return []
