"""The general lowering end to end: ``forge optimize`` with the built-in agent on one catalog op
of each category the issue lists, each verified by the real verifier (stress inputs with NaN and
inf, shape checks, isolation), with no per-op code in the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.agents import CoderContext
from forge.agents.builtin import BuiltinCoder
from forge.core.problem import read_problem_source
from forge.harness import OptimizeOptions, optimize

CATALOG = Path(__file__).parents[2] / "benchmarks" / "op_catalog"
ONE_PER_CATEGORY = {
    "activation": "elu",
    "norm": "groupnorm",
    "norm (training-mode state)": "batchnorm2d",
    "reduction": "argmin_dim2",
    "scan": "cumsum_reverse",
    "pooling": "maxpool2d",
    "loss": "cross_entropy",
    "softmax": "softmax_dim1",
    "conv": "conv2d_maxpool_sum",
    "matmul": "bmm_scale_softmax",
}


@pytest.mark.parametrize("category", sorted(ONE_PER_CATEGORY))
def test_the_lowering_verifies_an_op_of_each_category(category, tmp_path, fast_settings):
    op = CATALOG / f"{ONE_PER_CATEGORY[category]}.py"
    spec = read_problem_source(op)
    (proposal,) = BuiltinCoder(op, "cpp", inductor_candidate=False).propose(
        CoderContext(spec.name, spec.source, "cpu", "cpp")
    )
    assert (proposal.note or "").startswith("lowered family"), proposal.error
    run = optimize([op], OptimizeOptions(rounds=1, bank=tmp_path / "bank.db"), fast_settings)
    (result,) = run.results
    assert [t.status for t in result.trace] == ["passed"], result.reason
