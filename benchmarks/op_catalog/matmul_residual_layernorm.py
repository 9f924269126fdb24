"""matmul: Linear + residual + LayerNorm."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(512, 512)
        self.norm = torch.nn.LayerNorm(512)

    def forward(self, x):
        return self.norm(self.fc(x) + x)


def get_inputs():
    return [torch.randn(1024, 512)]


def get_init_inputs():
    return []
