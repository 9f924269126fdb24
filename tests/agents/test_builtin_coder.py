"""The built-in coder as a Coder: a candidate for every shipped example, a clear refusal otherwise."""

from __future__ import annotations

import pytest

from forge.agents import CoderContext
from forge.agents.builtin import BuiltinCoder
from tests.conftest import EXAMPLES, OPS

SHIPPED = sorted((EXAMPLES / "ops").glob("*.py"))


@pytest.mark.parametrize("op", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_example_gets_a_candidate(op):
    (proposal,) = BuiltinCoder(op).propose(CoderContext(op.stem, op.read_text(), "cpu", "cpp"))
    assert proposal.error is None, proposal.error
    assert proposal.source and "class ModelNew(Model)" in proposal.source and proposal.backend == "cpp"


def test_unknown_op_is_refused_with_a_hint(tmp_path):
    op = tmp_path / "conv.py"
    op.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.c = torch.nn.Conv2d(3, 4, 3)\n    def forward(self, x):\n        return self.c(x)\n"
        "def get_inputs():\n    return [torch.randn(1, 3, 8, 8)]\ndef get_init_inputs():\n    return []\n"
    )
    (proposal,) = BuiltinCoder(op).propose(CoderContext("conv", op.read_text(), "cpu", "cpp"))
    assert proposal.source is None and "can't handle conv" in (proposal.error or "") and "--model" in proposal.error


def test_cuda_gets_triton_and_raw_cuda_is_refused():
    op = OPS / "small_softmax.py"
    (proposal,) = BuiltinCoder(op, "triton").propose(CoderContext("small_softmax", op.read_text(), "cuda", "triton"))
    assert proposal.error is None and proposal.backend == "triton" and "@triton.jit" in (proposal.source or "")
    (proposal,) = BuiltinCoder(op, "cuda").propose(CoderContext("small_softmax", op.read_text(), "cuda", "cuda"))
    assert proposal.source is None and proposal.fatal and "Triton (CUDA)" in (proposal.error or "")
    assert "--model" in (proposal.error or "")
