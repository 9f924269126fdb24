"""GroupNorm (8 groups, affine) over NCHW activations, then SiLU."""

import torch

n, c, h, w = 8, 64, 32, 32


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.GroupNorm(8, c)

    def forward(self, x):
        return torch.nn.functional.silu(self.norm(x))


def get_inputs():
    return [torch.randn(n, c, h, w)]


def get_init_inputs():
    return []
