"""The tiny op computed another way (tanh from exp): right at the outputs' own scale."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(-2 * x.abs())
        return torch.sign(x) * (1 - e) / (1 + e) * 1e-5
