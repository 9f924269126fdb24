"""Row reduction: the sum of each row."""

import torch
import torch.nn as nn

batch_size = 2048
dim = 4096
reduce_dim = 1


class Model(nn.Module):
    def __init__(self, reduce_dim: int):
        super().__init__()
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.reduce_dim)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [reduce_dim]
