"""A small convolutional network: residual blocks of convolution, batch norm and ReLU, written
as classes of their own, as image models usually are.

`forge optimize examples/models/cnn_block.py --modules` profiles it, optimizes its hot classes and
proves the kernelized model against the original, in eager and under torch.compile.
"""

import torch
from torch import nn

batch, channels, size = 8, 32, 32


class ConvBNReLU(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.first = ConvBNReLU(c, c)
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn(self.conv(self.first(x))))


class Model(nn.Module):
    def __init__(self, c_in, c):
        super().__init__()
        self.stem = ConvBNReLU(c_in, c)
        self.blocks = nn.Sequential(Residual(c), Residual(c))
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        return self.pool(self.blocks(self.stem(x))).flatten(1)


def get_inputs():
    return [torch.randn(batch, 3, size, size)]


def get_init_inputs():
    return [3, channels]
