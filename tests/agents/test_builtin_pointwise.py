"""The built-in coder's pointwise family: fx chain → one fused C++ pass, verified."""

from __future__ import annotations

import pytest

from forge.agents.builtin import PointwiseRecipe, pointwise
from forge.harness import load_problem
from forge.verifier import verify
from tests.conftest import EXAMPLES, OPS


def _recipe(op):
    p = load_problem(op)
    return pointwise.analyze(p.model_cls(*p.init_inputs()), p.inputs())


def test_recognises_the_shipped_pointwise_examples():
    chain = _recipe(EXAMPLES / "ops" / "scale_bias_gelu.py")
    assert isinstance(chain, PointwiseRecipe) and chain.params == ("scale", "bias") and chain.linear is None
    epilogue = _recipe(EXAMPLES / "ops" / "linear_gelu.py")
    assert isinstance(epilogue, PointwiseRecipe) and epilogue.linear == "linear"


def test_unsupported_ops_get_a_reason(tmp_path):
    why = _recipe(EXAMPLES / "ops" / "softmax.py")
    assert isinstance(why, str) and "softmax" in why
    # a residual around the Linear: the epilogue would read the matmul's output where x is meant
    op = tmp_path / "residual_linear.py"
    op.write_text(OP.format(pshape="1", expr="torch.relu(self.lin(x) + x)"))
    why = _recipe(op)
    assert isinstance(why, str) and "besides the nn.Linear" in why


OP = """
import torch
import torch.nn as nn
import torch.nn.functional as F

batch = 6
channels = 12
width = 40


class Model(nn.Module):
    def __init__(self, channels, width):
        super().__init__()
        self.scale = nn.Parameter(torch.randn({pshape}))
        self.lin = nn.Linear(width, width)
        self.lin_no_bias = nn.Linear(width, width, bias=False)

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn(batch, channels, width)]


def get_init_inputs():
    return [channels, width]
"""

CASES = {
    "per_channel": ("channels, 1", "torch.clamp(F.gelu(x * self.scale) - 0.5, min=-2.0, max=3.0)"),
    "last_dim": ("width", "torch.sigmoid(x + self.scale) * torch.tanh(x)"),
    "scalar_only": ("1", "F.silu(x * 2.0).abs()"),
    "linear_epilogue": ("1", "F.gelu(self.lin(x), approximate='tanh') * 0.5"),
    "linear_no_bias": ("width", "torch.relu(self.lin_no_bias(x) + self.scale)"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_generated_chains_pass_the_verifier(name, fast_settings, tmp_path):
    pshape, expr = CASES[name]
    op = tmp_path / f"{name}.py"
    op.write_text(OP.format(pshape=pshape, expr=expr))
    recipe = _recipe(op)
    assert isinstance(recipe, PointwiseRecipe), recipe
    cand = tmp_path / "candidate.py"
    cand.write_text(pointwise.render(recipe))
    v = verify(op, cand, fast_settings)
    assert v.status == "passed", (v.reason, v.candidate_output[-2000:])


def test_shipped_affine_op_passes(fast_settings, tmp_path):
    recipe = _recipe(OPS / "small_affine.py")
    cand = tmp_path / "candidate.py"
    cand.write_text(pointwise.render(recipe))
    assert verify(OPS / "small_affine.py", cand, fast_settings).status == "passed"
