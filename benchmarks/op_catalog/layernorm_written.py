"""norm: LayerNorm over the last dim, written out."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        m = x.mean(-1, keepdim=True)
        v = (x - m).pow(2).mean(-1, keepdim=True)
        return (x - m) / torch.sqrt(v + 1e-5)


def get_inputs():
    return [torch.randn(1024, 512)]


def get_init_inputs():
    return []
