import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    raise ValueError("no inputs today")


def get_init_inputs():
    return []
