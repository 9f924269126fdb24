import torch
import not_a_real_module_forge  # noqa: F401


class Model(torch.nn.Module):
    def forward(self, x):
        return x
