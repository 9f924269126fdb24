"""A linear layer, its bias, a residual added and ReLU: a matmul epilogue."""

import torch

rows, features = 512, 512


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(features, features)

    def forward(self, x, residual):
        return torch.relu(self.fc(x) + residual)


def get_inputs():
    return [torch.randn(rows, features), torch.randn(rows, features)]


def get_init_inputs():
    return []
