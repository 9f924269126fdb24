"""The general lowering's first kernels: activations torch decomposes to pointwise primitives,
with no per-op code, verified end to end (NaN and infinities among the verifier's stress inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.agents.builtin.lowering.pointwise_lower import analyze
from forge.core.problem import load_problem
from forge.harness import OptimizeOptions, optimize

CATALOG = Path(__file__).parents[2] / "benchmarks" / "op_catalog"
ACTIVATIONS = ["leaky_relu", "elu", "selu", "hardtanh", "hardsigmoid", "softplus", "gelu_tanh_written"]


def _analyze(name: str):  # type: ignore[no-untyped-def]
    problem = load_problem(CATALOG / f"{name}.py")
    return analyze(problem.model_cls(*problem.init_inputs()), problem.inputs())


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_each_activation_becomes_one_fused_pass(name):
    recipe = _analyze(name)
    assert not isinstance(recipe, str), recipe
    assert recipe.body and recipe.result.startswith("t") and recipe.params == ()


def test_what_is_not_a_pointwise_graph_says_which_node():
    assert _analyze("sum_dim1") == "prims.sum: not a pointwise primitive on the input (lowered kernels so far)"
    assert "one float32 input" in str(_analyze("mse_loss"))


@pytest.mark.parametrize("name", ["elu", "hardtanh"])
def test_a_lowered_activation_verifies(name, tmp_path, fast_settings):
    run = optimize([CATALOG / f"{name}.py"], OptimizeOptions(rounds=1, bank=tmp_path / "bank.db"), fast_settings)
    (result,) = run.results
    assert [t.status for t in result.trace] == ["passed"], result.reason
