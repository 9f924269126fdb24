"""The bound counts the matmul work some output needs: a causal mask's half of an attention's scores
and weights is left out, work whose need moves with the data (a ReLU's zeros) stays counted."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from forge.core.roofline_record import Roofline
from forge.verifier.worker.op_work import roofline
from forge.verifier.worker.op_work.needed_matmul import unneeded_flops

B, H, N, E = 2, 3, 32, 8


class WrittenOutCausal(nn.Module):
    """A causal attention written out: every score computed, then the upper triangle masked."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()
        return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v


class WrittenOutFull(WrittenOutCausal):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1]), dim=-1) @ v


class ReluThenLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.relu(x))


class HalfUsed(nn.Module):
    """A Linear whose output's second half no output uses."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(64, 64, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)[:, :32].contiguous()


class OutsideAutograd(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return WrittenOutCausal()(q, k, v)


_WHOLE = 2 * (2 * B * H * N * N * E)  # both products of an attention written out, every MAC


def _qkv() -> list[torch.Tensor]:
    return [torch.randn(B, H, N, E) for _ in range(3)]


def _masked_half_flops() -> int:
    dropped = N * N - N * (N + 1) // 2  # score pairs above the diagonal, per (batch, head)
    return 2 * B * H * dropped * (E + E)  # each: a dot product for the score, a weight times a value row


def _first_score_flops() -> int:
    # the first query sees one key: the softmax of one score is 1 whatever the score, so no output
    # needs that dot product either
    return 2 * B * H * E


def test_a_written_out_causal_attentions_masked_half_is_unneeded_exactly():
    assert unneeded_flops(WrittenOutCausal(), [_qkv(), _qkv()], _WHOLE) == _masked_half_flops() + _first_score_flops()


def test_without_the_mask_every_product_is_needed():
    assert unneeded_flops(WrittenOutFull(), [_qkv(), _qkv()], _WHOLE) == 0


def test_zeros_that_move_with_the_data_stay_counted():
    # a ReLU zeroes about half of the Linear's input on each draw, in other places each time
    model = ReluThenLinear()
    assert unneeded_flops(model, [[torch.randn(16, 64)], [torch.randn(16, 64)]], 2 * 16 * 64 * 64) == 0


def test_output_columns_no_output_uses_are_unneeded():
    draws = [[torch.randn(16, 64)], [torch.randn(16, 64)]]
    assert unneeded_flops(HalfUsed(), draws, 2 * 16 * 64 * 64) == 2 * 16 * 32 * 64


def test_a_matmul_outside_autograd_is_counted_whole():
    assert unneeded_flops(OutsideAutograd(), [_qkv(), _qkv()], _WHOLE) == 0


def test_the_estimate_counts_the_needed_work_and_says_what_it_left_out():
    model, inputs = WrittenOutCausal(), _qkv()
    whole = _WHOLE
    one_draw = roofline.estimate(model, inputs, [model(*inputs)])
    assert (one_draw.flops, one_draw.unneeded_flops) == (whole, 0)
    two_draws = roofline.estimate(model, inputs, [model(*inputs)], _qkv())
    left_out = _masked_half_flops() + _first_score_flops()
    assert (two_draws.flops, two_draws.unneeded_flops) == (whole - left_out, left_out)
    note = Roofline(unneeded_flops=10**9).unneeded_note
    assert "1.000 GFLOP more that no output needs" in note
    assert Roofline(unneeded_flops=None).unneeded_note == ""


def _fused_counts(**kwargs: object) -> tuple[int, int]:
    counter = roofline.FlopCounter()
    q, k, v = _qkv()
    with counter, torch.no_grad():
        F.scaled_dot_product_attention(q, k, v, **kwargs)  # type: ignore[arg-type]
    return counter.flops, counter.masked_flops


def test_a_fused_attention_is_counted_and_its_causal_flag_or_mask_left_out():
    whole = 2 * B * H * N * N * (E + E)
    assert _fused_counts() == (whole, 0)
    assert _fused_counts(is_causal=True) == (whole, _masked_half_flops())
    tril = torch.ones(N, N, dtype=torch.bool).tril()
    assert _fused_counts(attn_mask=tril) == (whole, _masked_half_flops())


class ProjectedFusedWithFloatMask(nn.Module):
    """A projection (a matmul), then an attention fused without gradients, which torch runs as two
    bmm (its math path) when differentiated."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(E, E, bias=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(self.proj(q), k, v, attn_mask=mask)


def test_a_masked_pair_is_left_out_once_where_differentiating_runs_other_matmuls():
    causal = torch.zeros(N, N).masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    model, inputs = ProjectedFusedWithFloatMask(), [*_qkv(), causal]
    got = roofline.estimate(model, inputs, [model(*inputs)], [*_qkv(), causal])
    assert got.unneeded_flops == _masked_half_flops()  # the mask's, counted by the fused call alone
    projection = 2 * B * H * N * E * E
    assert got.flops == projection + 2 * B * H * N * N * (E + E) - _masked_half_flops()
