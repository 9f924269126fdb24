"""A test model: a stack of layers built with their index (as transformers and timm build theirs),
the last one scaled otherwise, between normalisations built alike. ``LAYERS`` sets the depth.
The layer's forward is a chain of elementwise steps, so that a fused kernel for it is faster by
construction (one pass over memory where eager makes thirty)."""

import torch
from torch import nn

LAYERS = 2
rows, width = 512, 1024


class Scaled(nn.Module):
    def __init__(self, dim, index, factor):
        super().__init__()
        self.index = index  # which layer it is: forward never reads it (a cache slot, a name)
        self.factor = factor  # forward reads it: a kernel that bakes it in is wrong where it differs
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # a chain of elementwise steps, each a pass over memory in eager: one fused kernel is faster
        y = x * self.weight
        for _ in range(12):
            y = y * 0.75 + 0.25
        return torch.tanh(y) * self.factor + x


class Norm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class Model(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.layers = nn.ModuleList(Scaled(dim, i, 2.0 if i == depth - 1 else 1.0) for i in range(depth))
        self.norms = nn.ModuleList(Norm(dim) for _ in range(depth))

    def forward(self, x):
        for layer, norm in zip(self.layers, self.norms, strict=True):
            x = norm(layer(x))
        return x


def get_inputs():
    return [torch.randn(rows, width)]


def get_init_inputs():
    return [width, LAYERS]
