"""A long chain of pointwise ops on a 4 MB tensor with a per-column weight: eager runs about a dozen
kernels forward and twice that backward, the built-in coder's fused kernel one pass each way (and one
reduction for the weight's gradient), so its training step wins by ~5x on a 2-core CPU: a margin a
loaded CI machine's null control does not swallow (the `--train` session's bank test). Smooth on
purpose: a relu, abs or maximum has a gradient that jumps where a rounding difference picks the
branch, and over a million fresh elements one such tie now and then fails the gradient check."""

import torch
import torch.nn as nn

rows = 1024
cols = 1024


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(cols) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.weight + 0.25
        y = y * y - 0.5 * x
        y = y * 0.75 + x
        y = y * x + 1.0
        y = y - x * 0.125
        return y * 2.0 - 1.0


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [cols]
