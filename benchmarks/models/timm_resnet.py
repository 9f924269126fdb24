"""ResNet-18 from timm on a small image batch: random weights (no download)."""

import timm
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = timm.create_model("resnet18", pretrained=False)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(1, 3, 64, 64)]


def get_init_inputs():
    return []
