"""The lowering's linear products through oneDNN (``matmul='onednn'``): which products it takes,
and the same results as the reference's MKL call either way."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from forge.agents.builtin.lowering import program
from forge.agents.builtin.lowering.program import LoweredGraph
from forge.agents.builtin.lowering.py_side import ONEDNN_LINEAR
from tests.agents.test_lowering_kernels import Op, check

pytestmark = pytest.mark.skipif(not ONEDNN_LINEAR, reason="this torch has no oneDNN linear")


def _source(model: nn.Module, inputs: list[torch.Tensor], matmul: str) -> str:
    lowered = program.analyze(model, inputs)
    assert isinstance(lowered, LoweredGraph), lowered
    return program.render(lowered, {"matmul": matmul})


class _SwiGLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(12, 20, bias=False), nn.Linear(12, 20), nn.Linear(20, 12)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))


class _ScaledWeight(nn.Module):  # the weight the product reads is computed in forward
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6, 10))

    def forward(self, x):  # type: ignore[no-untyped-def]
        return nn.functional.linear(x, self.weight * 0.5).relu()


@pytest.mark.parametrize("matmul", ["onednn", "aten"])
@pytest.mark.parametrize(
    ("model", "shape", "takes"),
    [
        (nn.Linear(16, 8), (5, 16), True),  # addmm
        (nn.Linear(16, 8, bias=False), (2, 3, 16), True),  # mm of a collapsed 3-D input
        (_SwiGLU(), (3, 7, 12), True),  # an epilogue between products
        (nn.Sequential(nn.Linear(9, 9), nn.GELU(), nn.Linear(9, 1)), (1, 9), True),  # one row, one output
        (_ScaledWeight(), (4, 10), True),  # the weight computed in forward gets a buffer, read through its transpose
    ],
)
def test_linear_products_match_the_reference_through_either_library(model, shape, takes, matmul):
    x = torch.randn(shape)
    check(model.eval(), [x], {"matmul": matmul})
    assert ("mkldnn._linear_pointwise" in _source(model, [x], matmul)) == (takes and matmul == "onednn")


@pytest.mark.parametrize(
    ("fn", "shapes"),
    [
        (lambda x, y: x @ y, [(4, 6), (6, 5)]),  # a product of two values, not of a weight's transpose
        (lambda x, w, b: torch.addmm(b, x, w.t()), [(4, 6), (5, 6), (1,)]),  # a broadcast bias
        (lambda x, w, b: torch.addmm(b[::2], x, w.t()), [(4, 6), (5, 6), (10,)]),  # a strided bias
        (lambda x, w: torch.addmm(x[:, :5], x, w.t(), beta=2), [(5, 6), (5, 6)]),  # beta scales the bias
        (lambda x, w: nn.functional.linear(x, w.t()), [(4, 6), (6, 5)]),  # a weight not contiguous
    ],
)
def test_products_oneDNN_linear_does_not_compute_keep_the_reference_call(fn, shapes):
    inputs = [torch.randn(s) for s in shapes]
    lowered = program.analyze(Op(fn), inputs)
    assert isinstance(lowered, LoweredGraph), lowered
    assert "matmul" not in lowered.knobs()
    check(Op(fn), inputs, {"matmul": "onednn"})  # the knob set where it does not apply is inert


def test_float64_linear_keeps_the_reference_call():
    model = nn.Linear(8, 4).double()
    lowered = program.analyze(model, [torch.randn(3, 8, dtype=torch.float64)])
    assert isinstance(lowered, LoweredGraph) and "matmul" not in lowered.knobs()


def test_the_library_knob_comes_first_so_the_first_move_measures_the_other():
    lowered = program.analyze(_SwiGLU().eval(), [torch.randn(2, 12)])
    assert isinstance(lowered, LoweredGraph)
    assert next(iter(lowered.knobs().items())) == ("matmul", ["onednn", "aten"])


class _DownsamplingBlock(nn.Module):
    """A ResNet block that halves its input (timm's BasicBlock with a downsample branch): two
    stride-2 convolutions reading the block's input, batch norms and ReLUs fused after them."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm2d(16), nn.BatchNorm2d(16), nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.down = nn.Conv2d(8, 16, 1, stride=2, bias=False)

    def forward(self, x):  # type: ignore[no-untyped-def]
        y = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
        return (y + self.bn3(self.down(x))).relu()


@pytest.mark.parametrize("config", [{}, {"conv_algo": "library"}, {"conv_layout": "channels_last"}])
def test_a_downsampling_block_matches_the_reference(config):
    block = _DownsamplingBlock().eval()
    for bn in (block.bn1, block.bn2, block.bn3):  # statistics away from their defaults
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    check(block, [torch.randn(2, 8, 16, 16)], config)
