"""A SwiGLU gate on a wide hidden layer: silu(a) * b, 8 x 512 x 4096 (a 64 MiB output, which glibc
maps fresh on every call, in a user's loop as in the verifier's workers)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.silu(a) * b


def get_inputs():
    return [torch.randn(8, 512, 4096), torch.randn(8, 512, 4096)]


def get_init_inputs():
    return []
