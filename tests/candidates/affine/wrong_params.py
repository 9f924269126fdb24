"""Names its parameters differently from the reference: the state_dict does not load."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(channels, 1))
        self.beta = nn.Parameter(torch.zeros(channels, 1))

    def forward(self, x):
        return torch.relu(x * self.gamma + self.beta)
