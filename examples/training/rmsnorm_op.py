"""The user's RMSNorm as an op, at the shape the training example feeds it (run from this directory):

forge optimize rmsnorm_op.py --train --bank kernels.db
python train_loop.py kernels.db
"""

import torch
from layers import RMSNorm as Model  # noqa: F401

FORGE_NAME = "train_rmsnorm"
batch_size = 4096
hidden = 1024


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden]
