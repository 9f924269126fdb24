"""A matmul with a bias in fp32, large enough in K that TF32 rounding shows (K = 1024)."""

import torch
import torch.nn as nn

batch_size = 64
in_features = 1024
out_features = 256


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
