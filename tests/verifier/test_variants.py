"""Shape variants reach the candidate's construction too (a Model that reads module-level sizes)."""

from __future__ import annotations

from forge.verifier import verify

OP = """
import torch
import torch.nn as nn

batch = 16
width = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(width, width)  # a module constant, not an init argument

    def forward(self, x):
        return torch.relu(self.lin(x))


def get_inputs():
    return [torch.randn(batch, width)]


def get_init_inputs():
    return []
"""

CAND = """
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        return torch.relu(torch.addmm(self.lin.bias, x, self.lin.weight.t()))
"""


def test_variant_constants_apply_while_the_candidate_is_built(fast_settings, tmp_path):
    op, cand = tmp_path / "op.py", tmp_path / "cand.py"
    op.write_text(OP)
    cand.write_text(CAND)
    v = verify(op, cand, fast_settings)
    assert v.status == "passed", v.reason
    assert "batch=9, width=39" in v.shapes
