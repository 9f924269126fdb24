"""Honest arithmetic, but at import it enters a torch function mode and never leaves it: every
torch call in the user's process (the reference's three as much as the kernel's two) goes through
Python first, which waits a tenth of a millisecond."""

import time

import torch
from torch.overrides import TorchFunctionMode

from forge_reference import Model


class _Delayed(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        time.sleep(1e-4)
        return func(*args, **(kwargs or {}))


_Delayed().__enter__()


class ModelNew(Model):
    def forward(self, x):
        return torch.addcmul(self.bias, x, self.scale).clamp_min_(0.0)
