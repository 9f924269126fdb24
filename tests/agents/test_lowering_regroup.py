"""Row fusion whose output pass writes another shape than its reductions read (a GroupNorm's
``view(N, G, -1)`` statistics, its ``(N, C, H, W)`` output): the box each task writes, the exact
check of where the output pass reads the statistics, a sum that is a var's first pass, and which
accumulator the tuner tries first."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from forge.agents.builtin.lowering import program
from forge.agents.builtin.lowering.cpp_fuse import offset_is_task, task_box
from forge.agents.builtin.lowering.program import LoweredGraph
from tests.agents.test_lowering_kernels import Op, check


def _group_norm_silu(x: torch.Tensor) -> torch.Tensor:
    return nn.functional.silu(nn.functional.group_norm(x, 4))


def _stats_read_at_another_task(x: torch.Tensor) -> torch.Tensor:
    s = x.view(4, 12).sum(-1, keepdim=True).flip(0)
    return x.view(8, 6) * s.repeat_interleave(2, 0)


def _stats_repeated_not_interleaved(x: torch.Tensor) -> torch.Tensor:
    # output row r reads row r % 4's sum, where the task writing it summed row r // 2: an offset
    # made of indices, + * / % only, so the check evaluates it (and finds it off)
    s = x.view(4, 12).sum(-1, keepdim=True)
    return x.view(8, 6) * s.repeat(2, 1)


def _stats_read_across_a_leading_axis(x: torch.Tensor) -> torch.Tensor:
    # the kept axis is not the first: the read is flat // 8 (another task's, at i0 = 1), not i1
    s = x.sum((0, 2))
    return x * s[:, None].expand(3, 8).reshape(2, 3, 4)


def _run_straddles_output_rows(x: torch.Tensor) -> torch.Tensor:
    y = x.view(6, 10)
    return torch.sigmoid((y - y.mean(-1, keepdim=True)).view(4, 15))


def _source(fn: object, x: torch.Tensor, config: dict) -> str:
    lowered = program.analyze(Op(fn), [x])
    assert isinstance(lowered, LoweredGraph), lowered
    return program.render(lowered, config)


@pytest.mark.parametrize("acc", ["double", "float"])
def test_a_group_norm_is_one_kernel_per_group_and_matches(acc):
    x = torch.randn(3, 8, 5, 7)
    source = _source(_group_norm_silu, x, {"fuse": True, "acc": acc})
    assert source.count("static void step") == 1, source  # statistics and output in one kernel
    # the mean's sum is the var's first pass: two summing loops (mean, squared deviations), not three
    assert source.count("reduction(+:") == 2, source
    check(Op(_group_norm_silu), [x], {"fuse": True, "acc": acc})
    check(nn.GroupNorm(2, 6), [torch.randn(2, 6, 3, 4) * 50 + 3], {"fuse": True, "acc": acc})


def test_an_output_pass_reading_another_tasks_result_runs_unfused():
    x = torch.randn(48)
    source = _source(_stats_read_at_another_task, x, {"fuse": True})
    assert source.count("static void step") == 2, source
    check(Op(_stats_read_at_another_task), [x], {"fuse": True})


def _rows_of(rows: int, out: tuple[int, int]):  # type: ignore[no-untyped-def]
    # each row of x.view(rows, -1) scaled by its own sum, written as ``out``: the box's axis p is
    # the output's first (two output rows a task) or its last (half an output row a task)
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x.view(rows, -1)
        return x.view(*out) * y.sum(-1, keepdim=True).expand(y.shape).reshape(out)

    return fn


@pytest.mark.parametrize(("rows", "out"), [(4, (8, 6)), (4, (2, 24))])
def test_a_box_at_the_first_or_the_last_axis_is_fused_and_matches(rows, out):
    fn, x = _rows_of(rows, out), torch.randn(48)
    assert _source(fn, x, {"fuse": True}).count("static void step") == 1
    check(Op(fn), [x], {"fuse": True})


@pytest.mark.parametrize(
    ("fn", "shape"), [(_stats_repeated_not_interleaved, (48,)), (_stats_read_across_a_leading_axis, (2, 3, 4))]
)
@pytest.mark.parametrize("threads", [0, 1])
def test_a_read_of_another_tasks_statistics_is_found_and_runs_unfused(fn, shape, threads):
    x = torch.randn(*shape)
    assert _source(fn, x, {"fuse": True}).count("static void step") == 2
    check(Op(fn), [x], {"fuse": True, "threads": threads})


def test_an_output_whose_rows_cut_across_the_tasks_runs_unfused():
    x = torch.randn(60)
    assert _source(_run_straddles_output_rows, x, {"fuse": True}).count("static void step") == 2
    check(Op(_run_straddles_output_rows), [x], {"fuse": True})


@pytest.mark.parametrize(
    ("shape", "kept", "out", "box"),
    [
        ((3, 4, 2, 35), [0, 1], (3, 8, 5, 7), (1, 2)),  # GroupNorm(4, 8): two channels a group
        ((4, 6), [0], (2, 12), (1, 6)),  # half a row of the output
        ((4, 12), [0], (8, 6), (0, 2)),  # two rows of it
        ((6, 10), [0], (4, 15), None),  # a run of 10 crosses rows of 15
        ((6, 10), [1], (6, 10), None),  # the kept axis does not lead: no contiguous run
        ((6, 10), [0], (61,), None),  # not as many elements
    ],
)
def test_task_box(shape, kept, out, box):
    assert task_box(shape, kept, out) == box


@pytest.mark.parametrize(
    ("offset", "holds"),
    [
        ("((u0 * 8 + u1) / 2)", True),
        ("(int32_t)(((u0 * 8 + u1) / 8) * 4 + (((u0 * 8 + u1) / 2) % 4))", True),
        ("((u0 * 8 + u1) / 2) + 1", False),  # the next task's
        ("(u0 * 8 + u1 + u2) / 2", False),  # moves inside the task
        ("(u0 * 8 + u1 - 1) / 2", False),  # a subtraction is not taken
        ("(i0 * 8 + u1) / 2", False),  # an index the box does not set
        ("u0 ? 1 : 0", False),  # a select is not taken
    ],
)
def test_offset_is_task(offset, holds):
    assert offset_is_task(offset, ["u0", "u1", "u2", "u3"], [3, 8, 5, 7], 70) is holds


@pytest.mark.parametrize(
    ("fn", "x", "first"),
    [
        (lambda x: x - x.mean(-1, keepdim=True), torch.randn(4, 16384), "float"),
        (lambda x: x - x.mean(-1, keepdim=True), torch.randn(2, 16385), "double"),  # longer: double first
        (lambda x: x.double().sum(-1), torch.randn(4, 8), "double"),  # a float64 sum
        (lambda x: x.cumsum(-1) + x.sum(-1, keepdim=True), torch.randn(4, 8), "double"),  # scans start in double
        (lambda x: x.amax(-1) + x.sum(-1), torch.randn(4, 8), "float"),  # max keeps the input's type anyway
        (lambda x: x - x.sum(0, keepdim=True), torch.randn(1024, 8), "double"),  # last axis kept: one after another
    ],
)
def test_the_accumulator_tried_first(fn, x, first):
    lowered = program.analyze(Op(fn), [x])
    assert isinstance(lowered, LoweredGraph), lowered
    assert program.space(lowered)["acc"][0] == first


def _exp_over_var_and_sum(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x - 2)
    return e / e.var(-1, keepdim=True) + e / e.sum(-1, keepdim=True)


def test_a_sum_whose_pass_also_stores_the_rows_exp_is_not_taken_from_the_var():
    # the last reduction's pass stores the costly value the output pass reads back: it must run
    x = torch.randn(6, 40)
    source = _source(_exp_over_var_and_sum, x, {"fuse": True})
    step = source[source.index("static void step0(") :]
    assert source.count("static void step") == 1, source
    assert step.count("forge_exp(") == 3, step  # var's two passes, the sum's (stored), none in the output's
    check(Op(_exp_over_var_and_sum), [x], {"fuse": True})
