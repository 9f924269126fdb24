"""Binary cross-entropy with logits against soft targets, with a positive-class weight, mean-reduced."""

import torch

rows, cols = 1024, 1024


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pos_weight", torch.full((cols,), 2.0))

    def forward(self, logits, target):
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, target, pos_weight=self.pos_weight)


def get_inputs():
    return [torch.randn(rows, cols), torch.rand(rows, cols)]


def get_init_inputs():
    return []
