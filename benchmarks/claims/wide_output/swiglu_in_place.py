"""The product written into silu's own output: one fresh 64 MiB tensor a call where eager makes two."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.silu(a).mul_(b)
