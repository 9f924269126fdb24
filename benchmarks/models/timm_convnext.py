"""ConvNeXt-atto from timm: random weights (no download), a small image batch."""

import timm
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = timm.create_model("convnext_atto", pretrained=False)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(2, 3, 64, 64)]


def get_init_inputs():
    return []
