"""Attention-style softmax over the last dim with a scale and an additive mask broadcast over heads."""

import torch

batch, heads, q, k = 4, 8, 128, 256


class Model(torch.nn.Module):
    def forward(self, scores, mask):
        return torch.softmax(scores * 0.125 + mask, dim=-1)


def get_inputs():
    mask = torch.zeros(batch, 1, 1, k)
    mask[..., k // 2 :] = -1e4
    return [torch.randn(batch, heads, q, k), mask]


def get_init_inputs():
    return []
