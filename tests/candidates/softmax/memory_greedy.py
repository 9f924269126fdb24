"""Correct and fast, but it holds a 1.5 GiB buffer it does not need: under the worker's memory
limit, far above what the reference itself uses."""

import torch
from forge_reference import Model

_SCRATCH = torch.ones(384 * 1024 * 1024)  # 1.5 GiB, touched, held for the process's life


class ModelNew(Model):
    def forward(self, x):
        return torch.softmax(x, dim=1)
