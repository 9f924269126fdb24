"""Where torch's own GELU kernel and the textbook formula part ways: at +inf.

``0.5 * x * (1 + erf(x / sqrt(2)))`` is inf at +inf, but torch 2.13's CPU kernel returns NaN there
(and NaN at -inf, as the formula does: -inf * 0). The verifier's NaN/inf stress case compares NaN
positions exactly, so a kernel written from the formula failed on every op with an exact GELU;
the built-in agent's kernels give what the device's torch gives instead, found by asking it.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F


@functools.cache
def gelu_nan_at_pos_inf(device: str = "cpu", approximate: str = "none") -> bool:
    """Whether ``F.gelu`` on ``device`` gives NaN at +inf (False where the device cannot be asked)."""
    try:
        # 67 elements: a vectorised body and a scalar tail, which must agree
        probe = torch.full((67,), math.inf, device=device)
        return bool(torch.isnan(F.gelu(probe, approximate=approximate)).all())
    except (RuntimeError, AssertionError):  # no such device here
        return False
