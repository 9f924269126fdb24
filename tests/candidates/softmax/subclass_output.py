"""Returns a tensor subclass instead of a plain torch.Tensor."""

import torch
import torch.nn as nn


class Deferred(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1).as_subclass(Deferred)
