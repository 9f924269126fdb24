"""Honest, and its import pulls in torch._inductor, as the built-in coder's Inductor-family
candidates do: importing torch._dynamo rebinds torch.manual_seed (torch's doing, not the
candidate's), which the user loop's watch must not read as the candidate's change."""

import torch
import torch._inductor.config  # noqa: F401

from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        return torch.addcmul(self.bias, x, self.scale).clamp_min_(0.0)
