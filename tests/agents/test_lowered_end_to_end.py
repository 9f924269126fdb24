"""The general lowering end to end: the built-in agent's first candidate for one catalog op of each
category the issue lists, each verified by the real verifier (stress inputs with NaN and inf, shape
checks, isolation), with no per-op code in the agent. The session around such a candidate (its
brief, confirmation and bank) is tested in tests/harness/test_builtin_session.py and the CLI's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.agents import CoderContext
from forge.agents.builtin import BuiltinCoder
from forge.core.problem import read_problem_source
from forge.verifier import verify

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


@pytest.mark.compiles  # ten ops compiled and verified: minutes, which the default run leaves to .ci/run
@pytest.mark.parametrize("category", sorted(ONE_PER_CATEGORY))
def test_the_lowering_verifies_an_op_of_each_category(category, tmp_path, fast_settings):
    op = CATALOG / f"{ONE_PER_CATEGORY[category]}.py"
    spec = read_problem_source(op)
    (proposal,) = BuiltinCoder(op, "cpp", inductor_candidate=False).propose(
        CoderContext(spec.name, spec.source, "cpu", "cpp")
    )
    assert (proposal.note or "").startswith("lowered family"), proposal.error
    candidate = tmp_path / "candidate.py"
    candidate.write_text(proposal.source or "")
    v = verify(op, candidate, fast_settings)
    assert v.status == "passed", (v.reason, v.candidate_output[-2000:])
