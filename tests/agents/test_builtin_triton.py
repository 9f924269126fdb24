"""The built-in coder's Triton kernels, run on CPU under TRITON_INTERPRET=1 (correct, not fast):
every row-wise kind, residual add + norm and the pointwise family against their references
(tests/agents/triton_check.py, in a fresh process), and one candidate through the real verifier.
With a GPU the same cases also compile and run on it (the ``gpu`` tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.agents import CoderContext
from forge.agents.builtin import BuiltinCoder
from forge.core.settings import load_settings
from forge.verifier import verify
from tests.agents.triton_check import CASES, run_cases, run_interpreted
from tests.conftest import OPS

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checked() -> dict[str, str]:
    return run_interpreted("tests.agents.triton_check")


@pytest.mark.parametrize("case", list(CASES))
def test_triton_kernel_matches_the_reference(checked, case):
    assert checked[case] == "ok", checked[case]


@pytest.fixture(scope="module")
def checked_on_gpu() -> dict[str, str]:
    return run_cases("cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(CASES))
def test_triton_kernel_matches_the_reference_on_gpu(checked_on_gpu, case):
    assert checked_on_gpu[case] == "ok", checked_on_gpu[case]


@pytest.mark.e2e  # the whole verifier under Triton's interpreter (half a minute): in .ci/run's heavy run
def test_a_triton_candidate_passes_the_real_verifier(cache_dir):
    op = OPS / "small_layernorm.py"
    (proposal,) = BuiltinCoder(op, "triton", inductor_candidate=False).propose(
        CoderContext(op.stem, op.read_text(), "cuda", "triton")
    )
    assert proposal.source
    cand = cache_dir / "triton_layernorm.py"
    cand.write_text(proposal.source)
    settings = load_settings(cache_dir=cache_dir, device="cpu", timing_budget_s=0.1, compile_baseline=False)
    v = verify(op, cand, settings)
    assert v.status == "passed", v.reason
    assert v.backend == "triton" and not v.timing_meaningful and v.speedup_vs_eager is None
