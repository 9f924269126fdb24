"""ConvBNReLU as cnn_block.py runs it, carved out by `forge optimize --modules`.

Instances: blocks.0.first, blocks.1.first; 31.9% of the model's time.
"""

import os
import sys

import torch

from forge.core.importing import import_file

_MODEL_FILE = '/work/main/examples/models/cnn_block.py'
_held = sys.modules.get('cnn_block')
if _held is None:
    sys.path.insert(0, os.path.dirname(_MODEL_FILE))  # the model's own imports
    import_file('cnn_block', _MODEL_FILE)
elif os.path.realpath(getattr(_held, "__file__", None) or "") != os.path.realpath(_MODEL_FILE):
    raise ImportError(f"'cnn_block' is another module ({_held}), not the model file {_MODEL_FILE}")

from cnn_block import ConvBNReLU as Model  # noqa: E402,F401

FORGE_NAME = 'cnn_block_ConvBNReLU'
in0_0 = 8
in0_1 = 32
in0_2 = 32
in0_3 = 32


def get_inputs():
    return [
        torch.randn((in0_0, in0_1, in0_2, in0_3), dtype=torch.float32),
    ]


def get_init_inputs():
    return [32, 32]
