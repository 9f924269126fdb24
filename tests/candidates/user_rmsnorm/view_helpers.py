"""KernelBench form with a helper method and a constant of its own: binds through a view."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))
        self.hidden_size = hidden  # a constant the reference keeps under no such name

    def _scale(self, x):
        return torch.rsqrt(x.pow(2).sum(dim=-1, keepdim=True) / self.hidden_size + self.eps)

    def forward(self, x):
        return x * self._scale(x) * self.weight
