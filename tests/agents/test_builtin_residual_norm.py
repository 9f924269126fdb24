"""The built-in coder's residual-add + norm family: recognised from fx traces (output order, a
single output, the norm written out or as a module), refused when the graph computes something
else, and emitted as C++ that passes the real verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.agents.builtin.residual_norm import ResidualNormRecipe, analyze, render
from forge.core.problem import load_problem
from forge.verifier import verify
from tests.conftest import EXAMPLES, sweep

OP = """
import torch
import torch.nn as nn

rows = {rows}
cols = {cols}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = {norm}
        self.weight = nn.Parameter(torch.randn(cols))

    def forward(self, x, residual):
{body}


def get_inputs():
    return [torch.randn(rows, cols) * 2 + 0.5, torch.randn(rows, cols)]


def get_init_inputs():
    return []
"""
LAYERNORM = "nn.LayerNorm(cols, eps=1e-5)"
MANUAL_RMS = (
    "        rms = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + 1e-6)\n        y = h * rms * self.weight\n"
)


def _op(tmp_path: Path, body: str, norm: str = LAYERNORM, rows: int = 24, cols: int = 300) -> Path:
    op = tmp_path / "add_norm_op.py"
    op.write_text(OP.format(rows=rows, cols=cols, norm=norm, body=body))
    return op


def _recipe(op: Path) -> ResidualNormRecipe | str:
    p = load_problem(op)
    return analyze(p.model_cls(*p.init_inputs()), p.inputs())


def test_recognises_the_shipped_example():
    recipe = _recipe(EXAMPLES / "ops" / "residual_rmsnorm.py")
    assert isinstance(recipe, ResidualNormRecipe), recipe
    assert recipe.norm.kind == "rmsnorm" and recipe.norm.weight == "norm.weight" and recipe.norm.eps == "norm.eps"
    assert recipe.outputs == ("norm", "sum") and not recipe.single


@pytest.mark.parametrize(
    ("body", "norm", "kind", "outputs", "single"),
    [
        ("        h = x + residual\n        return h, self.norm(h)", LAYERNORM, "layernorm", ("sum", "norm"), False),
        ("        return self.norm(torch.add(residual, x))", "nn.RMSNorm(cols)", "rmsnorm", ("norm",), True),
        ("        h = x + residual\n" + MANUAL_RMS + "        return (y,)", "None", "rmsnorm", ("norm",), False),
    ],
    ids=["layernorm-h-first", "rmsnorm-module-single", "manual-rms-1-tuple"],
)
def test_recognises_variants(tmp_path, body, norm, kind, outputs, single):
    recipe = _recipe(_op(tmp_path, body, norm))
    assert isinstance(recipe, ResidualNormRecipe), recipe
    assert (recipe.norm.kind, recipe.outputs, recipe.single) == (kind, outputs, single)


@pytest.mark.parametrize(
    "body",
    [
        "        h = x + residual\n        return self.norm(x), h",  # the norm is not of the sum
        "        h = x + residual\n        return self.norm(h) * 2, h",  # more work after the norm
        "        h = x + residual\n        return h",  # no norm
        "        h = x * residual\n        return self.norm(h), h",  # not an add
        "        h = x + residual\n        return self.norm(h), x",  # returns an input
        # the RMSNorm pattern's ops, wired differently: the weight scales rms * 2, not h * rms
        "        h = x + residual\n        rms = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + 1e-6)\n"
        "        return (rms * 2.0) * self.weight, h",
    ],
)
def test_other_graphs_are_refused_with_the_traced_ops(tmp_path, body):
    why = _recipe(_op(tmp_path, body))
    assert isinstance(why, str) and "not a residual add followed by a norm" in why and "traced ops" in why


def test_one_input_is_not_this_family():
    why = _recipe(EXAMPLES / "ops" / "layernorm.py")
    assert isinstance(why, str) and "two float32 inputs" in why


@pytest.mark.parametrize(
    ("body", "norm", "config"),
    sweep(
        [
            ("        h = x + residual\n        return h, self.norm(h)", LAYERNORM, None),
            ("        h = residual + x\n" + MANUAL_RMS + "        return y", "None", None),
            (
                "        h = x + residual\n        return self.norm(h), h",
                "nn.LayerNorm(cols, elementwise_affine=False)",
                {"acc": "float", "stream": True, "threads": 1},
            ),
        ],
        ids=["layernorm", "manual-rms-norm-only", "layernorm-streamed"],
    ),
)
def test_generated_kernels_pass_the_verifier(tmp_path, fast_settings, body, norm, config):
    op = _op(tmp_path, body, norm, rows=40, cols=512)
    recipe = _recipe(op)
    assert isinstance(recipe, ResidualNormRecipe), recipe
    cand = tmp_path / "candidate.py"
    cand.write_text(render(recipe, config))
    v = verify(op, cand, fast_settings)
    assert v.status == "passed", (v.reason, v.candidate_output[-2000:])
    assert v.backend == "cpp"
