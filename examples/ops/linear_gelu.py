"""Linear layer followed by a pointwise epilogue: gelu(x @ W^T + b) * 0.5 + residual scale."""

import torch
import torch.nn as nn

batch_size = 256
in_features = 1024
out_features = 1024


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return torch.nn.functional.gelu(y) * 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
