"""The lowering's Winograd convolution (``conv_algo='winograd'``): which convolutions it takes,
and its results against the reference on odd shapes, with a bias or without, NaN and inf in the
input (a tile holding one is summed directly) and in a filter (the whole call is direct)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from forge.agents.builtin.lowering import program
from forge.agents.builtin.lowering.program import LoweredGraph
from tests.agents.test_lowering_kernels import check, lowered_candidate, specials


def _knobs(model: nn.Module, x: torch.Tensor) -> dict[str, list[object]]:
    lowered = program.analyze(model, [x])
    assert isinstance(lowered, LoweredGraph), lowered
    return lowered.knobs()


def _source(model: nn.Module, x: torch.Tensor, algo: str) -> str:
    lowered = program.analyze(model, [x])
    assert isinstance(lowered, LoweredGraph), lowered
    return program.render(lowered, {"conv_algo": algo})


# (batch, channels, height, width, filters, bias): tile rows and columns cut at odd sizes, a 1x1
# image, one channel, filter counts off the register block (6 or 8) and the vector width
SHAPES = [
    (2, 3, 7, 9, 5, True),
    (1, 1, 1, 1, 1, False),
    (3, 16, 15, 17, 13, True),
    (2, 32, 8, 8, 40, False),
    (1, 4, 2, 35, 9, True),
]


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s[:5]) for s in SHAPES])
def test_a_winograd_convolution_matches_the_reference_with_nan_and_inf(shape):
    n, c, h, w, k, bias = shape
    torch.manual_seed(0)
    conv = nn.Conv2d(c, k, 3, padding=1, bias=bias)
    assert "forge_winograd3x3(" in _source(conv, torch.randn(n, c, h, w), "winograd")
    check(conv, [torch.randn(n, c, h, w) * 3])
    if n * c * h * w >= 4:
        check(conv, [specials((n, c, h, w), seed=1)])
    check(conv, [torch.full((n, c, h, w), float("inf"))])


def test_a_tile_holding_an_infinity_gives_the_references_inf_not_nan():
    """A single inf: the direct sum gives +-inf in every output that reads it; the transforms'
    differences would give inf - inf = NaN in some."""
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 6, 3, padding=1, bias=False)
    x = torch.randn(1, 4, 8, 8)
    x[0, 2, 3, 4] = float("inf")
    with torch.no_grad():
        want = conv(x)
        got = lowered_candidate(conv, [x], {"conv_algo": "winograd"})(x)
    assert torch.equal(torch.isnan(got), torch.isnan(want)) and torch.equal(torch.isinf(got), torch.isinf(want))
    assert torch.isinf(want).any()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)


def test_a_filter_holding_nan_or_inf_runs_the_direct_sum():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    with torch.no_grad():
        conv.weight[1, 2, 0, 1] = float("inf")
        conv.weight[3, 0, 2, 2] = float("nan")
    x = torch.randn(2, 3, 6, 7)
    with torch.no_grad():
        want = conv(x)
        got = lowered_candidate(conv, [x], {"conv_algo": "winograd"})(x)
    assert torch.isnan(want).any() and torch.isinf(want).any()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_a_residual_block_of_winograd_convolutions_matches_in_either_mode(mode):
    from tests.agents.test_lowering_kernels import _Residual

    block = _Residual()
    with torch.no_grad():
        for bn in (block.first.bn, block.bn):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 4, 9, 6)
    # two convolutions in eval mode's kernel and two in training mode's
    assert _source(block.eval(), x, "winograd").count("forge_winograd3x3(b") == 4
    block.train(mode == "train")
    check(block, [x], {"conv_algo": "winograd"})


OTHER_CONVOLUTIONS = {
    "stride_2": nn.Conv2d(4, 4, 3, stride=2, padding=1),
    "kernel_5": nn.Conv2d(4, 4, 5, padding=2),
    "no_padding": nn.Conv2d(4, 4, 3),
    "dilated": nn.Conv2d(4, 4, 3, padding=2, dilation=2),
    "grouped": nn.Conv2d(4, 4, 3, padding=1, groups=2),
    "one_dimensional": nn.Conv1d(4, 4, 3, padding=1),
}


@pytest.mark.parametrize("name", sorted(OTHER_CONVOLUTIONS))
def test_the_knob_is_offered_only_for_3x3_stride_1_padding_1_float32_convolutions(name):
    conv = OTHER_CONVOLUTIONS[name]
    x = torch.randn(2, 4, 9) if name == "one_dimensional" else torch.randn(2, 4, 9, 9)
    assert "conv_algo" not in _knobs(conv, x)
    check(conv, [x], {"conv_algo": "winograd"})  # the knob set where it does not apply is inert


def test_float64_and_channels_last_convolutions_run_as_the_library_runs_them():
    conv = nn.Conv2d(4, 4, 3, padding=1).double()
    assert "conv_algo" not in _knobs(conv, torch.randn(2, 4, 6, 6, dtype=torch.float64))
    block = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1))
    x = torch.randn(2, 4, 6, 6)
    assert _knobs(block, x)["conv_algo"] == ["winograd", "library"]
    laid_out = program.render(program.analyze(block, [x]), {"conv_algo": "winograd", "conv_layout": "channels_last"})
    # the first convolution's result is written channels-last: it runs as the library runs it;
    # the second returns its result, which stays row-major
    assert laid_out.count("forge_winograd3x3(b") == 1 and "torch.ops.aten.convolution.default(" in laid_out
    check(block, [x], {"conv_algo": "winograd", "conv_layout": "channels_last"})


def test_convolutions_whose_transformed_filters_outgrow_the_cache_start_at_the_library_call():
    small = nn.Conv2d(128, 128, 3, padding=1, bias=False)
    large = nn.Conv2d(256, 256, 3, padding=1, bias=False)
    assert _knobs(small, torch.randn(1, 128, 6, 6))["conv_algo"] == ["winograd", "library"]
    assert _knobs(large, torch.randn(1, 256, 6, 6))["conv_algo"] == ["library", "winograd"]
    check(large, [torch.randn(1, 256, 5, 7)], {"conv_algo": "winograd"})  # still right when the tuner tries it
