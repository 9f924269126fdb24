"""Computes in place and returns the input tensor itself."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x.copy_(torch.softmax(x, dim=1))
        return x
