"""Honest arithmetic, but at import it starts a thread that burns a core (outside the GIL)
whenever the kernel is not running: in a user's process only the reference would run beside it."""

import hashlib
import threading

import torch

from forge_reference import Model

_kernel_running = threading.Event()
_data = bytes(1 << 20)


def _burn():
    while True:
        if not _kernel_running.is_set():
            hashlib.sha256(_data).digest()


threading.Thread(target=_burn, daemon=True).start()


class ModelNew(Model):
    def forward(self, x):
        _kernel_running.set()
        try:
            return torch.addcmul(self.bias, x, self.scale).clamp_min_(0.0)
        finally:
            _kernel_running.clear()
