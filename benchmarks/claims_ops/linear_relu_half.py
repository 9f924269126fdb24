"""Linear layer, ReLU, times one half (a matmul with an epilogue)."""

import torch

batch, fin, fout = 512, 1024, 1024


class Model(torch.nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.fc = torch.nn.Linear(fin, fout)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 0.5


def get_inputs():
    return [torch.randn(batch, fin)]


def get_init_inputs():
    return [fin, fout]
