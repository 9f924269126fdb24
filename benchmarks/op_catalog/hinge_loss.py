"""loss: hinge loss."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x, y):
        return torch.clamp(1 - x * y, min=0).mean()


def get_inputs():
    return [torch.randn(4096), torch.randint(0, 2, (4096,)).float() * 2 - 1]


def get_init_inputs():
    return []
