"""The general lowering's C++ on small graphs: each case is traced, scheduled, written, compiled
and run, and compared with the reference on ordinary values and on NaN/inf (the semantics the
emitters claim to keep: NaN through max/min, first-extreme indices, pooling's padding rules).
"""

from __future__ import annotations

import copy
import sys
import types
from collections.abc import Callable

import pytest
import torch
from torch import nn

from forge.agents.builtin.lowering import program
from forge.agents.builtin.lowering.code import Statement, hoist
from forge.agents.builtin.lowering.program import LoweredGraph


class Op(nn.Module):
    def __init__(self, fn: Callable[..., object]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs):  # type: ignore[no-untyped-def]
        return self.fn(*xs)


def lowered_candidate(model: nn.Module, inputs: list[torch.Tensor], config: dict | None = None) -> nn.Module:
    """The lowering's candidate for ``model`` as the verifier would load it (weights copied)."""
    lowered = program.analyze(model, inputs)
    assert isinstance(lowered, LoweredGraph), lowered
    reference = types.ModuleType("forge_reference")
    reference.Model = type(model)  # type: ignore[attr-defined]
    sys.modules["forge_reference"] = reference
    namespace: dict = {}
    exec(compile(program.render(lowered, config), "<candidate>", "exec"), namespace)
    candidate = namespace["ModelNew"].__new__(namespace["ModelNew"])
    candidate.__dict__.update(copy.deepcopy(model).__dict__)
    return candidate


def check(model: nn.Module, inputs: list[torch.Tensor], config: dict | None = None) -> None:
    candidate = lowered_candidate(model, inputs, config)
    reference = copy.deepcopy(model)
    with torch.no_grad():
        want, got = reference(*inputs), candidate(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(want) == len(got)
    for w, g in zip(want, got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5, equal_nan=True)
        else:
            assert torch.equal(g, w)
    for (name, w), g in zip(reference.state_dict().items(), candidate.state_dict().values(), strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6, msg=f"module state {name}")


def specials(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).reshape(-1)
    x[3], x[x.numel() // 2], x[-2] = float("nan"), float("inf"), float("-inf")
    return x.reshape(shape)


POINTWISE = {
    "broadcast_bias_chain": (lambda x, b: torch.tanh(x * 2 + b).clamp(-0.5, 0.7), [(8, 33, 17), (33, 1)]),
    "where_compare": (lambda x: torch.where(x > 0.1, x.exp(), -x.abs().log1p()), [(64, 65)]),
    "softplus_expm1": (lambda x: nn.functional.softplus(x) + torch.expm1(x * 0.1), [(40, 70)]),
    "transposed_input": (lambda x: (x.transpose(0, 1) * 3).sigmoid(), [(31, 45)]),
    "flip_and_reshape": (lambda x: x.flip(1).reshape(6, -1) + 1, [(4, 9, 5)]),
    "maximum_nan": (lambda x, y: torch.maximum(x, y) - torch.minimum(x, y), [(16, 16), (16, 16)]),
    # torch's CPU kernel gives NaN at +inf where the formula gives inf (gelu_specials)
    "gelu_exact_at_inf": (lambda x: nn.functional.gelu(x * 2), [(16, 67)]),
    "gelu_tanh_at_inf": (lambda x: nn.functional.gelu(x, approximate="tanh") + 1, [(16, 67)]),
    "sinh_chain": (lambda x: torch.sinh(x * 0.5) - 1, [(16, 67)]),
}


@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_graphs_match_the_reference_with_nan_and_inf(name):
    fn, shapes = POINTWISE[name]
    check(Op(fn), [specials(s, k) for k, s in enumerate(shapes)])


REDUCTIONS = {
    "sum_last": (lambda x: x.sum(-1), (16, 300)),
    "sum_middle": (lambda x: x.sum(1), (8, 50, 37)),
    "mean_first": (lambda x: x.mean(0, keepdim=True), (70, 300)),
    "amax_two_axes": (lambda x: x.amax((0, 2)), (6, 9, 40)),
    "amin_middle_keeps_nan": (lambda x: x.amin(1), (5, 64, 300)),
    "var_unbiased": (lambda x: x.var(-1), (12, 1000)),
    "var_middle": (lambda x: x.var(1, unbiased=False), (4, 100, 20)),
    "full_sum": (lambda x: x.sum(), (100, 100)),
    "full_max": (lambda x: x.max(), (3, 7, 1000)),
    "prod_small": (lambda x: (x * 0.1 + 1).prod(-1), (16, 20)),
    "logsumexp_middle": (lambda x: torch.logsumexp(x, 1), (4, 128, 9)),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_over_any_axes(name):
    fn, shape = REDUCTIONS[name]
    check(Op(fn), [torch.randn(shape, generator=torch.Generator().manual_seed(1))])


@pytest.mark.parametrize("name", ["amin_middle_keeps_nan", "full_max", "sum_middle", "var_unbiased"])
def test_reductions_propagate_nan_and_inf(name):
    fn, shape = REDUCTIONS[name]
    check(Op(fn), [specials(shape)])


@pytest.mark.parametrize("acc", ["double", "float"])
def test_a_norm_over_the_channel_axis_with_either_accumulator(acc):
    check(Op(lambda x: x / x.pow(2).mean(1, keepdim=True).add(1e-6).sqrt()), [torch.randn(4, 64, 10, 10)], {"acc": acc})


def test_first_extreme_and_first_nan_win_in_arg_reductions():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [0.0, float("nan"), 5.0, float("nan")], [2.0, 2.0, 2.0, 2.0]])
    check(Op(lambda x: (torch.argmax(x, 1), torch.argmin(x, 1))), [x])
    check(Op(lambda x: torch.max(x, 0)), [x])
    check(Op(lambda x: torch.min(x, 1, keepdim=True)), [x])
    check(Op(lambda x: torch.argmax(x)), [x])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.cumsum(x, 1),
        lambda x: torch.cumsum(x, 0),
        lambda x: torch.cumprod(x * 0.1 + 1, -1),
        lambda x: torch.cumsum(x.flip(1), 1).flip(1),
        lambda x: torch.logcumsumexp(x, 1),
        lambda x: torch.logcumsumexp(x * 3.0, 0),
    ],
)
@pytest.mark.parametrize("rows", [8, 1], ids=["eight scans together", "one at a time"])
def test_scans_along_any_axis(fn, rows):
    check(Op(fn), [specials((17, 40))], {**program.DEFAULT, "rows": rows, "scan": "rows"})


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.cumsum(x, -1),
        lambda x: torch.cumsum(x.flip(-1) * 2.0 - 1.0, -1),  # a pointwise chain read into the vectors
        lambda x: torch.cumsum(x.transpose(0, 1), -1),  # rows read strided
    ],
    ids=["row", "fused read", "strided read"],
)
@pytest.mark.parametrize("length", [16, 43], ids=["whole vectors", "with a tail"])
def test_a_float32_row_cumsum_eight_at_a_time_matches(fn, length):
    x = specials((length, length))
    lowered = program.analyze(Op(fn), [x])
    assert isinstance(lowered, LoweredGraph)
    assert "_mm256_permute2f128_ps" in program.render(lowered, {**program.DEFAULT, "scan": "vector"})
    assert "_mm256_permute2f128_ps" not in program.render(lowered, {**program.DEFAULT, "scan": "rows"})
    check(Op(fn), [x], {**program.DEFAULT, "scan": "vector"})


def test_the_vector_scan_is_offered_only_where_it_fits():
    row = program.analyze(Op(lambda x: torch.cumsum(x, 1)), [torch.randn(4, 64)])
    column = program.analyze(Op(lambda x: torch.cumsum(x, 0)), [torch.randn(4, 64)])
    product = program.analyze(Op(lambda x: torch.cumprod(x, 1)), [torch.randn(4, 64)])
    assert isinstance(row, LoweredGraph) and isinstance(column, LoweredGraph) and isinstance(product, LoweredGraph)
    assert row.knobs()["scan"] == ["vector", "rows"]
    assert "scan" not in column.knobs() and "scan" not in product.knobs()


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_a_scan_with_a_float_accumulator_along_any_axis_of_three(dim):
    check(Op(lambda x: torch.cumsum(x, dim)), [torch.randn(5, 9, 12)], {**program.DEFAULT, "acc": "float"})
    check(Op(lambda x: torch.logcumsumexp(x, dim)), [specials((5, 9, 12))], {**program.DEFAULT, "acc": "float"})


def test_logcumsumexp_keeps_atens_infinities_and_nans():
    """Where the running value and the new one are the same infinity, ATen keeps the new value;
    a NaN met stays; -inf alone adds nothing."""
    inf = float("inf")
    rows = [[-inf, -inf, 1.0, -inf], [inf, inf, 0.0, -inf], [-inf, inf, -inf, 2.0], [0.5, float("nan"), 1.0, 3.0]]
    x = torch.tensor(rows).repeat(1, 5)
    for acc in ("double", "float"):
        check(Op(lambda t: torch.logcumsumexp(t, 1)), [x], {**program.DEFAULT, "acc": acc})


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: nn.functional.max_pool2d(x, 3, 2, padding=1),
        lambda x: nn.functional.max_pool2d(x, 2, ceil_mode=True, return_indices=True),
        lambda x: nn.functional.max_pool1d(x.flatten(2), 4, 3, dilation=2),
        lambda x: nn.functional.avg_pool2d(x, 3, 2, padding=1),
        lambda x: nn.functional.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False, ceil_mode=True),
        lambda x: nn.functional.avg_pool2d(x, 2, divisor_override=3),
    ],
)
def test_pooling_windows_padding_and_indices(fn):
    check(Op(fn), [specials((2, 3, 11, 13))])


def test_a_conv_epilogue_and_a_gathered_loss():
    conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GELU(), nn.GroupNorm(2, 8))
    check(conv, [torch.randn(2, 3, 9, 9)])
    ce = Op(lambda x, t: nn.functional.cross_entropy(x, t))
    check(ce, [torch.randn(16, 10), torch.randint(0, 10, (16,))])


def test_an_integer_index_tensor_along_one_dim_counts_negative_places_from_the_end():
    picked = Op(lambda x, i: x[:, i] * 2)  # aten.index: the index as an input
    check(picked, [torch.randn(5, 7), torch.tensor([3, -1, 0, -7, 6])])
    remainder = Op(lambda x: torch.remainder(x, 3) + torch.signbit(x - 2).to(torch.int64))  # Python's modulo
    check(remainder, [torch.arange(-9, 9).reshape(3, 6)])
    signed = Op(lambda x: torch.where(torch.signbit(x), torch.remainder(x, 1.5), x))  # -0.0 has its sign bit
    check(signed, [torch.tensor([[-4.0, -0.0, 0.0, 2.5, -1.5, 3.25]])])


def test_batchnorm_in_training_updates_its_running_statistics():
    bn = nn.BatchNorm2d(6).train()
    check(bn, [torch.randn(4, 6, 5, 5) * 3 + 1])


def test_other_shapes_run_the_reference_rather_than_the_built_kernel():
    model = Op(lambda x: x.sum(-1))
    candidate = lowered_candidate(model, [torch.randn(4, 8)])
    other = torch.randn(3, 5)
    torch.testing.assert_close(candidate(other), other.sum(-1))


def test_what_the_lowering_cannot_express_is_named():
    why = program.analyze(Op(lambda x: torch.nonzero(x)), [torch.randn(4, 4)])
    assert why == "aten.nonzero: its output size depends on the data"
    why = program.analyze(Op(lambda x: x.to(torch.complex64).abs()), [torch.randn(4, 4)])
    assert isinstance(why, str) and "complex" in why


def _heads_rotated(x, cos, sin):  # type: ignore[no-untyped-def]
    """An attention's head split (a permute of a view) then a rotary's even/odd pairs: the slices
    become as_strided nodes whose strides are the projection's storage, not the permuted value's."""
    b, s, _ = x.shape
    q, k, v = x.view(b, s, 3, 2, 8).permute(2, 0, 3, 1, 4)
    return _rotary_pairs(q, cos, sin) * 2 + _rotary_pairs(k, cos, sin) - v


@pytest.mark.parametrize(
    ("fn", "shapes"),
    [
        (_heads_rotated, [(2, 5, 48), (5, 4), (5, 4)]),
        (lambda x: torch.as_strided(x[1:], (2, 3), (1, 4)) * 3, [(4, 6)]),  # a view that starts further on
        (lambda x: x.t()[::2, 1:].exp(), [(7, 6)]),
    ],
)
def test_strided_views_of_permuted_or_offset_values_read_the_storage_they_view(fn, shapes):
    check(Op(fn), [specials(s, k) for k, s in enumerate(shapes)])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.as_strided(x[1:], (2, 3), (1, 4), 0) + 1,  # before the value's start
        lambda x: torch.as_strided(x[:2], (2, 3), (6, 5)) + 1,  # past its end: rows 2 and 3 are not its
    ],
)
def test_an_as_strided_reaching_outside_the_value_it_views_is_refused(fn):
    why = program.analyze(Op(fn), [torch.randn(4, 6)])
    assert why == "aten.as_strided: reads storage outside the value it views"


def test_a_strided_view_of_a_flip_reads_the_flip_not_the_storage_before_it():
    # a flip (prims.rev) makes storage of its own: the walk back to the projection stops there
    fn = Op(lambda x: x.view(2, 5, 2, 8).permute(0, 2, 1, 3).flip(-1)[..., ::2] * 2)
    x = torch.randn(2, 5, 16)
    # refused: the walk back stops at the flip, and a view of it is not a view of contiguous storage
    assert program.analyze(fn, [x]) == "aten.as_strided: of a value that is not a view of a contiguous one"
    check(Op(lambda x: x.flip(-1)[..., ::2] * 2), [specials((2, 5, 16))])  # a plain view of a flip is lowered


def test_a_strided_view_of_a_strided_view_at_another_offset():
    check(Op(lambda x: torch.as_strided(x.t()[:, 1:], (3, 2), (1, 12), 5).exp()), [specials((6, 4))])


@pytest.mark.parametrize("fuse", [True, False])
def test_norms_fused_per_row_or_not_give_the_same_result(fuse):
    layernorm = Op(lambda x: (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt())
    check(layernorm, [specials((33, 70))], {"fuse": fuse})
    check(nn.GroupNorm(4, 8), [torch.randn(3, 8, 5, 7)], {"fuse": fuse})


def test_a_row_group_whose_result_is_read_at_another_row_runs_unfused():
    model = Op(lambda x: x - x.sum(-1, keepdim=True).flip(0) * x.amax(-1, keepdim=True))
    inputs = [torch.randn(6, 40)]
    lowered = program.analyze(model, inputs)
    assert isinstance(lowered, LoweredGraph)
    source = program.render(lowered, {"fuse": True})
    assert "step0_0" in source  # the group's steps were emitted one by one
    check(model, inputs, {"fuse": True})


def _flipped_exp(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True) + e.flip(-1)


def _fused_function(source: str) -> str:
    start = source.index("static void step0(")
    return source[start : source.index("\n}\n", start)]


@pytest.mark.parametrize(
    ("fn", "exps"),
    [
        (lambda x: torch.softmax(x, -1), 1),  # the sum's pass stores exp(x - max), the output reads it back
        (_flipped_exp, 3),  # also read at another place of the row than its pass stored: computed each time
        (lambda x: torch.softmax(x, -1).double(), 2),  # the output's buffer cannot hold the float exactly
    ],
)
def test_a_costly_value_of_a_rows_last_reduction_is_stored_once_and_read_back_only_where_right(fn, exps):
    inputs = [specials((24, 24))]
    lowered = program.analyze(Op(fn), inputs)
    assert isinstance(lowered, LoweredGraph)
    fused = _fused_function(program.render(lowered, {"fuse": True}))
    assert fused.count("forge_exp(") == exps, fused
    check(Op(fn), inputs, {"fuse": True})


def test_loop_invariant_values_are_computed_before_the_simd_loop():
    body = [
        Statement("const float t0 = b0[i0 * 8 + i1];", frozenset({"b0", "i0", "i1"})),
        Statement("const float t1 = b1[i0];", frozenset({"b1", "i0"})),
        Statement("const float t2 = std::sqrt(t1);", frozenset({"b1", "i0"})),
        Statement("const float t3 = ((float)(t0 / t2));", frozenset({"b0", "b1", "i0", "i1"})),
        Statement("y[i0 * 8 + i1] = t3;"),  # not a value: stays where it is
    ]
    outside, inside = hoist(body, "i1")
    assert outside == body[1:3] and inside == [body[0], body[3], body[4]]


def test_what_a_value_depends_on_comes_from_the_graph_so_a_rows_norm_leaves_its_loop():
    class L2(nn.Module):
        def forward(self, x):
            return torch.nn.functional.normalize(x, dim=1)

    lowered = program.analyze(L2(), [torch.randn(8, 64)])
    assert not isinstance(lowered, str)
    source = program.render(lowered)
    loop = source.index("for (int64_t i1 = 0; i1 < 64; ++i1)", source.index("std::sqrt"))
    before, inside = source[:loop], source[loop : source.index("}", loop)]
    assert "std::sqrt" in before and "std::sqrt" not in inside  # the row's norm, once per row
    assert " / t" in inside  # the division by it, per element
    check(L2(), [torch.randn(8, 64)])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[:, 1:7:2] * 2 + x[:, 0:1],
        lambda x: x.select(1, 2) + x[:, -1],
        lambda x: torch.triu(x) @ x,
        lambda x: torch.cumsum(x, 1)[:, :-1],
    ],
)
def test_slices_selects_and_masks_from_iota(fn):
    check(Op(fn), [torch.randn(9, 9)])


def _rotary_pairs(x, cos, sin):  # type: ignore[no-untyped-def]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


@pytest.mark.parametrize(
    ("fn", "shapes"),
    [
        (_rotary_pairs, [(2, 3, 8, 16), (8, 8), (8, 8)]),  # stack: parts of one along the last dim
        (lambda x, y: torch.cat((x.exp(), y, x[:, :1] * 2), dim=1).sum(-1), [(5, 7), (5, 3)]),  # three parts
        (lambda x, y: torch.cat((x, y), 0) * 3, [(2, 6), (4, 6)]),  # along the outer dim
        (lambda x: torch.cat((x[..., 4:], -x[..., :4]), -1).tanh(), [(3, 5, 8)]),  # rotate_half
        (lambda x, y: torch.cat((x, y), 1) @ torch.cat((y, x), 1).t(), [(3, 4), (3, 5)]),  # a library call's inputs
        (lambda x: torch.stack((x, x * 2, -x.exp()), -1), [(5, 7)]),  # three parts, returned as they are
        (lambda x: torch.stack((x.sin(), x.cos()), -1), [(2000,)]),  # one row: its loop split into chunks
        (lambda x, y: torch.cat((x, y[:, :1], x * 2), 1).exp(), [(4, 3), (4, 5)]),  # a one-wide part between two
        (lambda x: torch.stack((x, x + 1), dim=-1).to(torch.float64).sum(1), [(6, 9)]),  # read by a reduction
    ],
)
def test_concatenations_read_each_part_in_its_own_range(fn, shapes):
    check(Op(fn), [specials(s, k) for k, s in enumerate(shapes)])


def test_a_stack_along_the_last_dim_is_written_part_by_part_with_affine_loads():
    """Rotary pairs: each part computed once and stored at its place in the pairs, loads affine in
    the SIMD loop's variable (no division, no select by the index's parity)."""
    shapes = [(2, 3, 8, 16), (8, 8), (8, 8)]
    lowered = program.analyze(Op(_rotary_pairs), [torch.randn(s) for s in shapes])
    assert isinstance(lowered, LoweredGraph)
    source = program.render(lowered, None)
    step = source[source.index("static void step0_0") : source.index('extern "C"')]
    assert "for (int64_t k = c0; k < c1; ++k)" in step and "* 2 + 1] = " in step
    body = step.split("#pragma omp simd")[1]
    assert " ? " not in body and "/" not in body


class _Fire(nn.Module):
    """SqueezeNet's fire module: in-place ReLUs on convolutions' outputs, then a concatenation."""

    def __init__(self) -> None:
        super().__init__()
        self.squeeze, self.e1, self.e3 = nn.Conv2d(3, 4, 1), nn.Conv2d(4, 5, 1), nn.Conv2d(4, 6, 3, padding=1)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):  # type: ignore[no-untyped-def]
        s = self.act(self.squeeze(x))
        return torch.cat([self.act(self.e1(s)), self.act(self.e3(s))], 1)


def test_an_in_place_update_of_a_made_value_is_read_as_the_new_value():
    check(_Fire().eval(), [specials((2, 3, 6, 6))])
    why = program.analyze(Op(lambda x: (lambda y: y.relu_() + y)(x * 2)), [torch.randn(4, 4)])
    assert not isinstance(why, str), why  # y + y after the update reads the updated value: no old read
    check(Op(lambda x: (lambda y: y.relu_() + y)(x * 2)), [specials((4, 4))])


def _view_then_update(x):  # type: ignore[no-untyped-def]
    y = x * 2
    v = y[0]
    y.relu_()
    return v + 1


def test_an_update_seen_through_an_earlier_view_is_refused():
    why = program.analyze(Op(_view_then_update), [torch.randn(4, 4)])
    assert why == "aten.copy_: the updated value is read again after the update, or through a view"


class _Masked(nn.Module):
    """A plain tensor attribute (not a parameter, not a registered buffer)."""

    def __init__(self) -> None:
        super().__init__()
        self.mask = torch.tril(torch.ones(6, 6))

    def forward(self, x):  # type: ignore[no-untyped-def]
        return (x * self.mask).sum(dim=-1)


class _MadeInForward(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return torch.minimum(x, torch.tensor(0.5)) * 2


def test_plain_tensor_attributes_and_tensors_made_in_forward_are_graph_inputs():
    check(_Masked(), [torch.randn(3, 6, 6)])
    made = Op(lambda x: x * torch.tensor([1.0, float("nan"), -2.0, float("inf"), 0.5, 3.0]) + torch.tensor(2.0))
    check(made, [torch.randn(4, 6)])
    made_here = _MadeInForward()
    torch.fx.symbolic_trace(made_here)  # as the hand-tuned families do: leaves _tensor_constant<k> on it
    assert hasattr(made_here, "_tensor_constant0")
    check(made_here, [torch.randn(4, 6)])
    big = Op(lambda x: x + torch.arange(1 << 15, dtype=torch.float32).clone().reshape(-1)[: x.shape[-1]])
    assert isinstance(program.analyze(big, [torch.randn(2, 8)]), LoweredGraph)  # iota, not a constant
    huge = torch.randn(1 << 15)
    why = program.analyze(Op(lambda x: x + torch.tensor(huge.tolist())[:8]), [torch.randn(2, 8)])
    assert isinstance(why, str) and "register it as a buffer" in why


class _ConvBNReLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(6)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return torch.relu(self.bn(self.conv(x)))


def _overwritten(model: nn.Module, inputs: list[torch.Tensor]) -> list[str]:
    lowered = program.analyze(model, inputs)
    assert isinstance(lowered, LoweredGraph), lowered
    return sorted(str(source.target) for source in lowered.sched.overwrites.values())


def test_an_epilogue_is_written_over_the_library_result_it_alone_reads():
    """Batch norm and ReLU after a convolution, GELU after a linear layer: the epilogue reads the
    library's result element for element and nothing else reads it, so it is written there (no
    new tensor) and the result is the reference's."""
    bn = _ConvBNReLU().eval()
    with torch.no_grad():
        bn.bn.running_mean.uniform_(-1, 1)
        bn.bn.running_var.uniform_(0.5, 2)
    x = specials((2, 4, 7, 7))
    assert _overwritten(bn, [x]) == ["aten.convolution.default"]
    check(bn, [x])
    for algo, allocations in (("library", 0), ("winograd", 1)):  # Winograd's result is the one buffer
        source = program.render(program.analyze(bn, [x]), {"conv_algo": algo})
        assert source.split("def _kernel(self")[1].split("def ")[0].count("torch.empty") == allocations  # eval mode
    linear = nn.Sequential(nn.Linear(8, 16), nn.GELU())
    assert _overwritten(linear, [torch.randn(4, 8)]) == ["aten.addmm.default"]
    check(linear, [specials((4, 8))])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w: (lambda y: (y.relu(), y))(x @ w),  # the result is returned too
        lambda x, w: (lambda y: y - y.amax(-1, keepdim=True))(x @ w),  # a reduction reads it as well
        lambda x, w: (lambda y: y + y.t())(x @ w),  # read at another element
        lambda x, w: (lambda y: y.relu() + y[:1])(x @ w),  # read through a view (broadcast)
    ],
)
def test_a_library_result_read_elsewhere_keeps_its_own_storage(fn):
    model, inputs = Op(fn), [specials((6, 6)), specials((6, 6), seed=1)]
    assert _overwritten(model, inputs) == []
    check(model, inputs)


class _Residual(nn.Module):
    """Two convolutions with batch norm, the block's input added back: the first result feeds the
    second convolution, the last is returned."""

    def __init__(self) -> None:
        super().__init__()
        self.first = _ConvBNReLU()
        self.conv = nn.Conv2d(6, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return torch.relu(x + self.bn(self.conv(self.first(x))))


def _laid_out(model: nn.Module, inputs: list[torch.Tensor]) -> dict[str, tuple[int, ...]]:
    traced = program.analyze(model, inputs)
    assert isinstance(traced, LoweredGraph), traced
    sched = program._laid_out(traced.graphs[0], {"conv_layout": "channels_last"}).sched
    return {str(n): sched.layouts[s] for n, s in sched.buffers.items() if s in sched.layouts}


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_convolutions_run_channels_last_and_the_output_is_the_references_layout(mode):
    """With the layout knob on, a convolution's input, weight and result are channels-last
    buffers, the result feeding the next convolution is written channels-last over the first
    result, and the returned value is row-major: outputs (and batch norm's running statistics in
    training mode) equal the reference's."""
    block = _Residual()
    with torch.no_grad():
        for bn in (block.first.bn, block.bn):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    # NaN and inf in training mode would make the running statistics NaN on both sides
    x = specials((2, 4, 7, 5)) if mode == "eval" else torch.randn(2, 4, 7, 5)
    laid = _laid_out(block.eval(), [x])
    block.train(mode == "train")
    assert {"convolution", "convolution_1"} <= set(laid) and set(laid.values()) == {(0, 2, 3, 1)}
    check(block, [x], {"conv_layout": "channels_last"})
    candidate = lowered_candidate(block, [x], {"conv_layout": "channels_last"})
    source = program.render(program.analyze(block, [x]), {"conv_layout": "channels_last"})
    assert "memory_format=torch.channels_last" in source
    with torch.no_grad():
        out = candidate(x)
    assert out.is_contiguous()


def test_a_convolution_whose_result_is_returned_or_viewed_by_torch_stays_row_major():
    returned = nn.Conv2d(3, 5, 3)
    assert _laid_out(returned, [torch.randn(2, 3, 6, 6)]) == {}
    flattened = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    laid = _laid_out(flattened, [torch.randn(2, 3, 6, 6)])
    assert "convolution" in laid  # the ReLU reads it through the reader, the matmul reads the ReLU's row-major buffer
    check(flattened, [specials((2, 3, 6, 6))], {"conv_layout": "channels_last"})
    pooled = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(2), nn.Conv2d(4, 4, 1))
    laid = _laid_out(pooled, [torch.randn(2, 3, 8, 8)])
    assert "convolution" in laid and "convolution_1" not in laid  # a pooling writes row-major
    check(pooled, [specials((2, 3, 8, 8))], {"conv_layout": "channels_last"})


@pytest.mark.parametrize(
    ("model", "shape"),
    [
        (nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU()), (2, 1, 5, 9)),  # one input channel
        # a height of 1: no index of the rows' loop in any load, which must still stay in it
        (nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, (1, 3))), (1, 3, 1, 13)),
        # strided, then depthwise; 11 rows: a last tile of 3
        (
            nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.GELU(), nn.Conv2d(4, 4, 3, groups=4, padding=1)),
            (3, 3, 23, 10),
        ),
    ],
)
def test_channels_last_steps_on_odd_shapes(model, shape):
    model.eval()
    assert "convolution" in _laid_out(model, [torch.randn(*shape)])
    check(model, [specials(shape)], {"conv_layout": "channels_last"})


class _StackedThenConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, a, b):  # type: ignore[no-untyped-def]
        return torch.relu(self.conv(torch.cat([a, b], -1).clone()))


class _AsStridedBetweenConvs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 1)

    def forward(self, x):  # type: ignore[no-untyped-def]
        y = torch.relu(self.conv1(x))
        return torch.relu(self.conv2(torch.as_strided(y, y.shape, y.stride()) + 1))


@pytest.mark.parametrize(
    ("model", "shapes"),
    [
        (_StackedThenConv(), [(2, 4, 6, 1), (2, 4, 6, 1)]),  # a stack's writer writes row-major
        (_AsStridedBetweenConvs(), [(2, 3, 6, 6)]),  # an as_strided offset is a row-major one
        (nn.Sequential(nn.MaxPool2d(2), nn.BatchNorm2d(4), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU()), [(2, 4, 8, 6)]),
    ],
)
def test_channels_last_buffers_written_or_read_past_the_plain_pointwise_path(model, shapes):
    model.eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
    check(model, [torch.randn(*s) for s in shapes], {"conv_layout": "channels_last"})


def test_a_module_built_with_other_constructor_arguments_runs_the_reference():
    """The same input shape, other filter counts (the verifier's size variants shrink constructor
    arguments): the kernel's sizes are constants, so the module runs the reference rather than
    read past its buffers."""
    built, other = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(3, 4, 3, padding=1)
    x = torch.randn(2, 3, 9, 9)
    candidate = lowered_candidate(built, [x])
    candidate.__dict__.update(copy.deepcopy(other).__dict__)
    with torch.no_grad():
        torch.testing.assert_close(candidate(x), other(x))
