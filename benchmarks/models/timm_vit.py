"""ViT-tiny from timm at 96x96 (36 patches): random weights (no download)."""

import timm
import torch

LAYERS = 12  # ViT blocks, as DeiT-tiny has (benchmarks.model_runs --depths runs copies at other depths)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = timm.create_model("vit_tiny_patch16_224", img_size=96, depth=LAYERS, pretrained=False)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(2, 3, 96, 96)]


def get_init_inputs():
    return []
