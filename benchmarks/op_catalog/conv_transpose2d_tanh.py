"""conv: ConvTranspose2d + tanh."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1)

    def forward(self, x):
        return torch.tanh(self.conv(x))


def get_inputs():
    return [torch.randn(8, 32, 32, 32)]


def get_init_inputs():
    return []
