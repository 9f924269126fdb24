"""The general lowering's Triton kernels: the cases of tests/agents/triton_lowered_check.py run on
CPU under TRITON_INTERPRET=1 in a fresh process (correct, not fast), and on a GPU when there is one;
what the emitter writes for a few small graphs; the built-in coder's Triton backend falling through
to the lowering; one such candidate through the real verifier."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from forge.agents import CoderContext
from forge.agents.builtin import BuiltinCoder
from forge.agents.builtin.lowering import triton_program
from forge.agents.builtin.lowering.triton_emit import TRITON
from forge.agents.builtin.lowering.triton_expr import index, tl_literal
from forge.core.settings import load_settings
from forge.verifier import verify
from tests.agents.triton_check import run_interpreted
from tests.agents.triton_lowered_check import CASES, run_cases

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checked() -> dict[str, str]:
    return run_interpreted("tests.agents.triton_lowered_check")


@pytest.mark.parametrize("case", list(CASES))
def test_lowered_triton_kernel_matches_the_reference(checked, case):
    assert checked[case] == "ok", checked[case]


@pytest.fixture(scope="module")
def checked_on_gpu() -> dict[str, str]:
    return run_cases("cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(CASES))
def test_lowered_triton_kernel_matches_the_reference_on_gpu(checked_on_gpu, case):
    assert checked_on_gpu[case] == "ok", checked_on_gpu[case]


def test_index_expressions_divide_as_integers_and_constant_offsets_load_one_scalar():
    assert index("((f) / 7) % 3 + f / 21") == "((f) // 7) % 3 + f // 21"
    assert TRITON.load(2, "0", 1) == "tl.load(b2 + 0)"  # a 0-d value: no mask on a scalar pointer
    assert TRITON.load(2, "(f / 4)", 64) == "tl.load(b2 + ((f // 4)), mask=mask, other=0)"
    assert tl_literal(float("-inf"), torch.float32) == 'float("-inf")' and tl_literal(True, torch.bool) == "1"


class _Pow(torch.nn.Module):
    def forward(self, x):
        return x.abs() ** 2.5


def test_one_kernel_per_step_and_torch_runs_what_is_kept_whole():
    class Cumulative(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x * 2, dim=1).amax(dim=0)

    lowered = triton_program.analyze(Cumulative(), [torch.randn(4, 6)])
    assert not isinstance(lowered, str), lowered
    source = triton_program.render(lowered)
    # x * 2 is written by a kernel (the scan's input), the scan runs in torch, then the amax kernel
    assert source.count("@triton.jit\ndef _step") == 2 and "torch.ops.aten.cumsum.default(b[" in source
    assert "steps pointwise, scan, reduce" in source


def test_what_the_triton_lowering_cannot_write_is_named():
    why = triton_program.analyze(_Pow(), [torch.randn(3, 4)])
    assert isinstance(why, str) and why.startswith("prims.pow: an exponent other than")


def test_the_triton_backend_falls_through_to_the_lowering(tmp_path):
    op = tmp_path / "middle_sum.py"
    op.write_text(
        textwrap.dedent("""
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return torch.relu(x).sum(dim=1) * 0.5
        def get_inputs():
            return [torch.randn(4, 33, 7)]
        def get_init_inputs():
            return []
        """)
    )
    (proposal,) = BuiltinCoder(op, "triton", inductor_candidate=False).propose(
        CoderContext(op.stem, op.read_text(), "cuda", "triton")
    )
    assert proposal.source and "the general lowering (Triton)" in proposal.source
    cand = tmp_path / "cand.py"
    cand.write_text(proposal.source)
    settings = load_settings(cache_dir=tmp_path / "cache", device="cpu", timing_budget_s=0.1, compile_baseline=False)
    v = verify(op, cand, settings)
    assert v.status == "passed", v.reason
    assert v.backend == "triton" and not v.timing_meaningful and v.speedup_vs_eager is None
