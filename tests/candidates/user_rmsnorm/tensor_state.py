"""Keeps a buffer the reference lacks (not in the state_dict): an existing instance cannot supply it."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))
        self.register_buffer("ones", torch.ones(hidden), persistent=False)

    def forward(self, x):
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight * self.ones
