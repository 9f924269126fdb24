"""Average pooling by rows of outputs (the ``pool`` knob's ``rows``) and with each input row's
horizontal sums made once for the output rows they serve (``separable``, 2-D windows that overlap
along the rows) against point by point and the reference: the run of outputs each window position
reaches (padding, stride, ceil_mode), the divisor's rules, NaN and inf, 1-3 spatial dims, and
where each form is offered."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from forge.agents.builtin.lowering import program
from forge.agents.builtin.lowering.program import LoweredGraph
from tests.agents.test_lowering_kernels import Op, check, lowered_candidate, specials

AVERAGE_POOLS = {
    "3x3 stride 1, padding not counted": (
        lambda x: nn.functional.avg_pool2d(x, 3, 1, padding=1, count_include_pad=False),
        (2, 3, 11, 13),
    ),
    "3x3 stride 2, padding counted": (lambda x: nn.functional.avg_pool2d(x, 3, 2, padding=1), (2, 3, 11, 13)),
    "ceil_mode, last windows cut": (
        lambda x: nn.functional.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False, ceil_mode=True),
        (2, 3, 12, 14),
    ),
    "divisor override": (lambda x: nn.functional.avg_pool2d(x, 2, divisor_override=3), (2, 3, 11, 13)),
    "stride 3 over a window of 5": (lambda x: nn.functional.avg_pool2d(x, 5, 3, padding=2), (1, 2, 9, 16)),
    "1-D, then a residual": (lambda x: x[..., ::2] + nn.functional.avg_pool1d(x, 2, 2), (2, 4, 17 * 2)),
    "3-D": (lambda x: nn.functional.avg_pool3d(x, 3, 2, padding=1, count_include_pad=False), (1, 2, 5, 7, 9)),
    "wider than the input": (lambda x: nn.functional.avg_pool1d(x, 5, 1, padding=2), (1, 2, 3)),
    "5x3 stride (2, 1), rows of one plane in more than one block": (
        lambda x: nn.functional.avg_pool2d(torch.tanh(x), (5, 3), (2, 1), padding=(2, 1)),
        (1, 3, 37, 6),
    ),
}
SEPARABLE = {
    "3x3 stride 1, padding not counted",
    "3x3 stride 2, padding counted",
    "ceil_mode, last windows cut",
    "stride 3 over a window of 5",
    "5x3 stride (2, 1), rows of one plane in more than one block",
}


@pytest.mark.parametrize("form", ["separable", "rows", "points"])
@pytest.mark.parametrize("case", list(AVERAGE_POOLS))
def test_average_pooling_separable_by_rows_and_by_points_matches(case, form):
    fn, shape = AVERAGE_POOLS[case]
    x = specials(shape)
    lowered = program.analyze(Op(fn), [x])
    assert isinstance(lowered, LoweredGraph), lowered
    # the separable form where the windows overlap along a 2-D pooling's rows; elsewhere by rows
    assert ("held[" in program.render(lowered, {"pool": form})) == (form == "separable" and case in SEPARABLE)
    check(Op(fn), [x], {"pool": form})


@pytest.mark.parametrize("case", list(AVERAGE_POOLS))
def test_by_rows_a_float32_pooling_gives_eagers_bits(case):
    # accumulated in float in ATen's order, divided as ATen divides: equal, not merely close
    fn, shape = AVERAGE_POOLS[case]
    x = torch.randn(shape) * 1e4 + 3
    lowered = program.analyze(Op(fn), [x])
    assert isinstance(lowered, LoweredGraph), lowered
    assert "float row[" in program.render(lowered, {"pool": "rows"})
    assert "float row[" not in program.render(lowered, {"pool": "points"})
    with torch.no_grad():
        got = lowered_candidate(Op(fn), [x], {"pool": "rows"})(x)
    assert torch.equal(got, fn(x))


def test_the_pool_knob_is_offered_for_average_pooling_only():
    def space(fn, x):  # type: ignore[no-untyped-def]
        lowered = program.analyze(Op(fn), [x])
        assert isinstance(lowered, LoweredGraph), lowered
        return program.space(lowered)

    x = torch.randn(1, 2, 8, 8)
    assert space(lambda t: nn.functional.avg_pool2d(t, 2), x)["pool"] == ["rows", "points"]  # no overlap
    assert space(lambda t: nn.functional.avg_pool2d(t, 3, 1, 1), x)["pool"] == ["separable", "rows", "points"]
    assert space(lambda t: nn.functional.avg_pool1d(t, 3, 1), x[0])["pool"] == ["rows", "points"]  # 1-D
    assert "pool" not in space(lambda t: nn.functional.max_pool2d(t, 2), x)


def _pool_then(tail):  # type: ignore[no-untyped-def]
    def fn(x: torch.Tensor) -> torch.Tensor:
        return tail(x, nn.functional.avg_pool2d(x, 3, 1, padding=1, count_include_pad=False))

    return fn


@pytest.mark.parametrize(
    ("tail", "steps"),
    [
        (lambda x, p: x + p, 1),  # a residual: run on each row the pooling has just written
        (lambda x, p: torch.relu(p) * 2, 1),
        (lambda x, p: x + p.flip(-1), 2),  # reads another element of the row: the two run apart
        (lambda x, p: x + p.roll(1, -2), 2),  # reads another task's row
    ],
)
def test_the_pointwise_step_after_a_pooling_runs_in_its_task_where_it_reads_its_own_element(tail, steps):
    fn, x = _pool_then(tail), specials((2, 3, 9, 10))
    lowered = program.analyze(Op(fn), [x])
    assert isinstance(lowered, LoweredGraph), lowered
    assert program.render(lowered, {"pool": "rows"}).count("static void step") == steps
    assert program.render(lowered, {"pool": "rows", "fuse": False}).count("static void step") == 2
    check(Op(fn), [x], {"pool": "rows"})
    y = torch.randn(2, 3, 9, 10)
    with torch.no_grad():
        assert torch.equal(lowered_candidate(Op(fn), [y], {"pool": "rows"})(y), fn(y))
    # separable: the same fusion, the sums in another order (within float rounding)
    assert program.render(lowered, {"pool": "separable"}).count("static void step") == steps
    check(Op(fn), [x], {"pool": "separable"})


class _PoolAddConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x + nn.functional.avg_pool2d(x, 3, 1, padding=1, count_include_pad=False)))


def test_a_tail_whose_buffer_a_convolution_reads_channels_last_runs_in_its_own_step():
    model, x = _PoolAddConv(), specials((2, 3, 8, 8))
    lowered = program.analyze(model, [x])
    assert isinstance(lowered, LoweredGraph), lowered
    laid = {"pool": "rows", "conv_layout": "channels_last", "conv_algo": "library"}  # the residual: NHWC
    assert program.render(lowered, laid).count("static void step") == 3  # pooling, residual, ReLU
    check(model, [x], laid)
    row_major = {"pool": "rows", "conv_layout": "row_major", "conv_algo": "library"}
    assert program.render(lowered, row_major).count("static void step") == 2  # the residual in the pooling's
    check(model, [x], row_major)


def test_a_pooling_whose_padded_row_would_not_fit_a_tasks_stack_runs_point_by_point():
    def fn(x: torch.Tensor) -> torch.Tensor:  # 8 outputs, each window 20001 wide: a padded row of 20008
        return nn.functional.avg_pool1d(x, 20001, 1, padding=10000)

    x = torch.randn(1, 2, 8)
    lowered = program.analyze(Op(fn), [x])
    assert isinstance(lowered, LoweredGraph), lowered
    assert "pool" not in program.space(lowered)
    assert "row[" not in program.render(lowered, {"pool": "rows"})
    check(Op(fn), [x], {"pool": "rows"})
