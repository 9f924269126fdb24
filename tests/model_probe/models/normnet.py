"""A test model: linear layers between normalisations written as a class of the model's own."""

import torch
from torch import nn

rows, width = 64, 256


class ScaleNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.a, self.norm_a = nn.Linear(dim, dim), ScaleNorm(dim)
        self.b, self.norm_b = nn.Linear(dim, dim), ScaleNorm(dim)

    def forward(self, x):
        return self.norm_b(self.b(self.norm_a(self.a(x))))


def get_inputs():
    return [torch.randn(rows, width)]


def get_init_inputs():
    return [width]
