"""A user's own layers for the training example: an RMSNorm, used twice in a small network."""

import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


class TwoNormNet(nn.Module):
    """Linear, RMSNorm, GELU, Linear, RMSNorm: the user's layer twice in one training step."""

    def __init__(self, hidden: int):
        super().__init__()
        self.up = nn.Linear(hidden, hidden)
        self.norm1 = RMSNorm(hidden)
        self.down = nn.Linear(hidden, hidden)
        self.norm2 = RMSNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm2(self.down(torch.nn.functional.gelu(self.norm1(self.up(x)))))
