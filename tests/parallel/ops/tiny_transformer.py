"""A two-block transformer (attention + MLP + norms) in the op format, for real plan runs."""

import torch

from tests.parallel.models import TinyTransformer

batch, seq = 4, 16


class Model(TinyTransformer):
    pass


def get_inputs():
    return [torch.randint(0, 128, (batch, seq))]


def get_init_inputs():
    return []
