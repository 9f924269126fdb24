"""Writes its own frames into the worker's channel to the parent: a garbage case result first."""

import socket
import sys

import torch
import torch.nn as nn

from forge.verifier.protocol.channel import Channel

_chan = Channel(socket.socket(fileno=int(sys.argv[2])))


class ModelNew(nn.Module):
    def forward(self, x):
        _chan.send({"kind": "case_result", "id": "base/0:normal:0", "outputs": "all good", "facts": [1, 2]})
        return torch.softmax(x, dim=1)
