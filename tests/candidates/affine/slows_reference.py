"""Honest in the verifier's worker, but at import it replaces torch.relu, which the reference
calls and the kernel does not: in a user's process the reference would run slower beside it."""

import time

import torch

from forge_reference import Model

_relu = torch.relu


def _slow_relu(x):
    time.sleep(0.0005)
    return _relu(x)


torch.relu = _slow_relu


class ModelNew(Model):
    def forward(self, x):
        return torch.addcmul(self.bias, x, self.scale).clamp_min_(0.0)
