"""Correct and fast, but each call holds a 1.5 GiB scratch buffer it does not need: under the
worker's memory limit, far above what the reference itself uses."""

import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        scratch = torch.ones(384 * 1024 * 1024)  # 1.5 GiB, touched
        return torch.softmax(x, dim=1) + 0 * scratch[0]
