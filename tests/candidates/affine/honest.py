"""Subclasses the reference (forge's preferred shape) and fuses scale, bias and ReLU."""

import torch

from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        return torch.addcmul(self.bias, x, self.scale).clamp_min_(0.0)
