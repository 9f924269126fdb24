"""The built-in coder's pointwise family: fx chain → one fused C++ pass, verified."""

from __future__ import annotations

import pytest
import torch

from forge.agents.builtin import PointwiseRecipe, pointwise
from forge.agents.builtin.ops import CppMath, cpp_math_source
from forge.core.problem import load_problem
from forge.verifier import verify
from tests.conftest import EXAMPLES, GELU_OVERFLOW_DIFFERS, OPS, sweep


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


@pytest.mark.parametrize("name", sweep(list(CASES), ids=list(CASES)))
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


def test_the_erf_knob_and_erf_itself_are_in_an_exact_gelus_kernel_only(tmp_path):
    for name, has_erf in [("per_channel", True), ("last_dim", False), ("linear_epilogue", False)]:
        pshape, expr = CASES[name]
        op = tmp_path / f"{name}.py"
        op.write_text(OP.format(pshape=pshape, expr=expr))
        recipe = _recipe(op)
        assert isinstance(recipe, PointwiseRecipe)
        assert ("erf" in pointwise.space(recipe)) == has_erf, name
        # the kernel defines the float math its ops call, erf only where one is an exact GELU
        assert ("float forge_erf(" in pointwise.render(recipe)) == has_erf, name
    assert pointwise.POINTWISE_DEFAULT["erf"] == pointwise.space(_recipe(EXAMPLES / "ops" / "linear_gelu.py"))["erf"][0]


# the largest |error| of the exact GELU against float64 on [-12, 12] (benchmarks.kernels.erf_rational
# measures 4.7e-7 and 1.65e-6; eager's own is 3.8e-7)
ERF_BOUNDS = {"torch": 6e-7, "rational": 1.8e-6}


@GELU_OVERFLOW_DIFFERS
@pytest.mark.parametrize("form", list(ERF_BOUNDS))
def test_both_erf_forms_of_the_exact_gelu_stay_accurate(form, cache_dir, monkeypatch):
    """Dense over both tails; erf never above 1 (1 + erf < 0 flips the sign of the GELU's tail);
    the specials as torch: a very negative x gives 0, -inf NaN, inf what torch gives, NaN NaN."""
    from forge import cpp
    from forge.agents.builtin.cpp_snippets import HEADER
    from forge.agents.builtin.pointwise_expr import CPP, gelu

    monkeypatch.setenv("FORGE_CACHE_DIR", str(cache_dir))
    lib = cpp.load(
        HEADER
        + cpp_math_source({CppMath.ERF}, form)
        + 'extern "C" void gelu(const float* x, float* y, int64_t n) {\n    #pragma omp simd\n'
        + f"    for (int64_t i = 0; i < n; ++i) y[i] = {gelu('x[i]', 'none', CPP)};\n}}\n"
        + 'extern "C" void erf_of(const float* x, float* y, int64_t n) {\n    #pragma omp simd\n'
        + "    for (int64_t i = 0; i < n; ++i) y[i] = forge_erf(x[i]);\n}\n"
    )
    x = torch.linspace(-12, 12, 2_000_001)
    y = torch.empty_like(x)
    lib.gelu(x, y, x.numel())
    exact = 0.5 * x.double() * (1 + torch.special.erf(x.double() / 2**0.5))
    assert float((y.double() - exact).abs().max()) <= ERF_BOUNDS[form]
    z = torch.linspace(0, 6, 3_000_001)
    e = torch.empty_like(z)
    lib.erf_of(z, e, z.numel())
    assert float(e.max()) <= 1.0 and float((e.double() - torch.special.erf(z.double())).abs().max()) < 6.1e-7
    inf = float("inf")
    special = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1e-40, 1e10, -1e10, 3e38, -3e38, inf, -inf, float("nan")])
    got = torch.empty_like(special)
    lib.gelu(special, got, special.numel())
    torch.testing.assert_close(got, torch.nn.functional.gelu(special), equal_nan=True, atol=0, rtol=1e-6)


def test_the_rational_erf_passes_the_verifier(fast_settings, tmp_path):
    pshape, expr = CASES["per_channel"]
    op = tmp_path / "per_channel.py"
    op.write_text(OP.format(pshape=pshape, expr=expr))
    recipe = _recipe(op)
    assert isinstance(recipe, PointwiseRecipe)
    cand = tmp_path / "candidate.py"
    cand.write_text(pointwise.render(recipe, {"erf": "rational"}))
    assert "forge_erf" in cand.read_text() and "x * p / q" in cand.read_text()
    v = verify(op, cand, fast_settings)
    assert v.status == "passed", (v.reason, v.candidate_output[-2000:])


def test_chunk_is_inert_where_the_analysed_shape_has_many_outer_blocks():
    """scale_bias_gelu's per-channel parameters give 16 x 64 outer blocks: the kernel never splits
    them, so chunk values render one kernel (the tuner must not spend rounds on them, nor bank
    one); linear_gelu's epilogue is one run over the whole output, split by chunk."""
    from forge.agents.builtin.tuner import effective_config

    many = _recipe(EXAMPLES / "ops" / "scale_bias_gelu.py")
    one = _recipe(EXAMPLES / "ops" / "linear_gelu.py")
    assert isinstance(many, PointwiseRecipe) and isinstance(one, PointwiseRecipe)
    assert (many.outer, one.outer) == (16 * 64, 1)
    for recipe, inert in [(many, True), (one, False)]:
        space = pointwise.space(recipe)
        config = {**{k: v[0] for k, v in space.items()}, "chunk": 65536}
        shown = effective_config(space, config, lambda c, r=recipe: pointwise.canonical(r, c))
        assert ("chunk" not in shown) == inert
