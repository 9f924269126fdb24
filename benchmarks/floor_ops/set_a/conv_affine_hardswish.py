"""3x3 convolution, a per-channel scale and shift (a folded batch norm), then hardswish."""

import torch

n, cin, cout, h, w = 4, 16, 32, 32, 32


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.scale = torch.nn.Parameter(torch.rand(cout, 1, 1) + 0.5)
        self.shift = torch.nn.Parameter(torch.randn(cout, 1, 1) * 0.1)

    def forward(self, x):
        return torch.nn.functional.hardswish(self.conv(x) * self.scale + self.shift)


def get_inputs():
    return [torch.randn(n, cin, h, w)]


def get_init_inputs():
    return []
