"""An op whose rank 1 never arrives at the first collective (a hung rank)."""

import os
import time

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        if os.environ.get("RANK") == "1":
            time.sleep(3600)
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x)


def get_inputs():
    return [torch.randn(2, 8)]


def get_init_inputs():
    return []
