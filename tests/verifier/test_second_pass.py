"""The bound counts the second read an op's math forces: a reduction whose result is used beside
the data it reduced, over groups larger than the cache keeps between the two reads (a normalization
by a whole-tensor norm), only the part the cache cannot keep, and only there (a row's LayerNorm or
softmax reads its input once)."""

from __future__ import annotations

import pytest
import torch

from forge.core.roofline_record import Roofline
from forge.verifier.machine.figures import MachineFigures
from forge.verifier.machine.readings import WorkingSetBandwidth
from forge.verifier.worker.op_work import roofline
from forge.verifier.worker.op_work.passes import Reread

MIB = 1 << 20


def _figures(fast_up_to_mib: int) -> MachineFigures:
    """DRAM at 20 GB/s; copies at 1-16 MiB run at 200 GB/s up to ``fast_up_to_mib``, at DRAM's past
    it (the fastest level measured, 1 MiB, is what the warm bound's second read is priced past)."""
    fast = {mib: mib <= fast_up_to_mib for mib in (1, 2, 4, 8, 16)}
    sets = tuple(WorkingSetBandwidth(m * MIB, 200.0 if f else 21.0, 300.0 if f else 25.0) for m, f in fast.items())
    return MachineFigures("cpu", 20.0, 300.0, 100.0, 25.0, 150.0, working_sets=sets)


class Frobenius(torch.nn.Module):
    def forward(self, x):
        return x / torch.linalg.vector_norm(x)


class HandLayerNorm(torch.nn.Module):
    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        return (x - mean) / ((x - mean) ** 2).mean(-1, keepdim=True).add(1e-5).sqrt()


def _call(model: torch.nn.Module, x: torch.Tensor) -> roofline.CallEstimate:
    return roofline.estimate(model, [x], [model(x)])


def test_a_whole_tensor_normalization_reads_again_what_the_cache_cannot_keep():
    x = torch.randn(1 << 20)  # 4 MiB: the norm covers all of it before any output
    call = _call(Frobenius(), x)
    assert call.rereads == (Reread(4 * MIB, 4 * MIB),)
    small_cache = roofline.record(call, _figures(fast_up_to_mib=2), 1 * MIB)
    # of the 4 MiB, the 1 MiB a last-level cache keeps is read from it (a pass walking backward)
    assert (small_cache.reread_bytes, small_cache.reread_group_bytes) == (3 * MIB, 4 * MIB)
    twice = roofline.bound_ms(call.bytes + 3 * MIB, 0, 20.0, 300.0, call.bytes_read + 3 * MIB, 25.0)
    assert small_cache.bound_ms == pytest.approx(twice, abs=1e-6)
    once = roofline.bound_ms(call.bytes, 0, 20.0, 300.0, call.bytes_read, 25.0)
    assert small_cache.bound_ms > 1.3 * once
    assert "reads 3.15 MB of it a second time" in small_cache.second_read_note
    # a last-level cache that can keep all 4 MiB: one read from DRAM
    big_cache = roofline.record(call, _figures(fast_up_to_mib=2), 8 * MIB)
    assert big_cache.reread_bytes is None and big_cache.bound_ms == pytest.approx(once, abs=1e-6)
    assert big_cache.second_read_note == ""
    # warm, its data in cache already: past the fastest level measured (1 MiB), read again from the cache
    assert big_cache.cache_reread_bytes == 3 * MIB
    # the last-level cache's size unknown: nothing counted, the bound stays a bound
    assert roofline.record(call, _figures(fast_up_to_mib=2), None).reread_bytes is None


@pytest.mark.parametrize(
    "model",
    [torch.nn.LayerNorm(256, elementwise_affine=False), torch.nn.Softmax(dim=-1), HandLayerNorm()],
    ids=["layernorm", "softmax", "hand-written layernorm"],
)
def test_a_rows_normalization_reads_its_input_once(model):
    x = torch.randn(4096, 256)  # 4 MiB in rows of 1 KiB: a row stays in cache between its passes
    call = _call(model, x)
    assert call.rereads == (Reread(4 * MIB, 1024),)  # seen, in groups of one row
    rec = roofline.record(call, _figures(fast_up_to_mib=2), 2 * MIB)
    assert rec.reread_bytes is None and rec.cache_reread_bytes is None
    assert rec.bound_ms == pytest.approx(roofline.bound_ms(call.bytes, 0, 20.0, 300.0, call.bytes_read, 25.0))


def test_a_rows_normalization_with_rows_past_the_cache_reads_twice():
    x = torch.randn(2, 1 << 20)  # rows of 4 MiB
    rec = roofline.record(_call(HandLayerNorm(), x), _figures(fast_up_to_mib=2), 2 * MIB)
    # each row read again past the 2 MiB a cache keeps, once (not once per statistic)
    assert (rec.reread_bytes, rec.reread_group_bytes) == (2 * 2 * MIB, 4 * MIB)


class SumTimesTwo(torch.nn.Module):
    def forward(self, x, y):
        return x.sum() * 2 + y


class MatMul(torch.nn.Module):
    def forward(self, x, w):
        return x @ w


@pytest.mark.parametrize(
    ("model", "shapes"),
    [(SumTimesTwo(), [(1 << 20,), (1 << 20,)]), (MatMul(), [(512, 512), (512, 512)])],
    ids=["a sum used beside another tensor", "a matmul"],
)
def test_no_second_read_where_the_reduced_data_is_not_used_again(model, shapes):
    inputs = [torch.randn(*s) for s in shapes]
    assert roofline.estimate(model, inputs, [model(*inputs)]).rereads == ()


def test_the_verdicts_bound_says_it_counts_the_second_read():
    """The roofline check's detail (which the verdict, CLI and prompts show) names the second read."""
    from forge.core.verdict import Verdict
    from forge.verifier.parent.timing.statistics import record_regimes, record_roofline, record_speedups

    call = _call(Frobenius(), torch.randn(1 << 20))
    rec = roofline.record(call, _figures(fast_up_to_mib=2), 1 * MIB)
    v = Verdict.from_json({"status": "passed"})
    record_speedups(v, [1_000_000] * 20, [2_000_000] * 20, [], None)
    record_regimes(v, [1_000_000] * 20, [2_000_000] * 20, [], working_set=call.bytes, cache=4 * MIB)
    record_roofline(v, rec)
    (check,) = [c for c in v.checks if c.name == "roofline"]
    assert "a second time" in check.detail, check.detail
    assert isinstance(v.roofline, Roofline) and v.roofline.reread_bytes == 3 * MIB


@pytest.mark.parametrize("judged", ["cold", "warm"])
def test_the_bound_gives_torch_compiles_fraction_beside_eagers_in_the_judged_regime(judged):
    """Eager's and torch.compile's fractions of the bound come from the regime the verdict is
    judged in: cold, their own medians; warm, their ratios to the candidate's warm calls."""
    from forge.core.verdict import Verdict
    from forge.verifier.parent.timing.statistics import record_regimes, record_roofline, record_speedups

    v = Verdict.from_json({"status": "passed"})
    ms = 1_000_000
    record_speedups(v, [ms] * 20, [2 * ms] * 20, [ms * 3 // 2] * 20, None)  # cold: 1, 2 and 1.5 ms
    warm_cand, warm_eager, warm_compile = [ms // 2] * 20, [ms] * 20, [ms * 3 // 4] * 20  # warm: 0.5, 1, 0.75 ms
    working_set = 1 * MIB if judged == "warm" else 64 * MIB
    record_regimes(v, warm_cand, warm_eager, warm_compile, working_set=working_set, cache=32 * MIB)
    roof = Roofline(bytes=working_set, bandwidth_gbs=20.0, bound_ms=0.3, cache_bound_ms=0.15, cache_bandwidth_gbs=100.0)
    record_roofline(v, roof)
    roof = v.roofline
    assert roof is not None
    if judged == "warm":
        assert roof.level == "cache"
        assert (roof.fraction_candidate, roof.fraction_eager, roof.fraction_compile) == (0.3, 0.15, 0.2)
    else:
        assert roof.level is None
        assert (roof.fraction_candidate, roof.fraction_eager, roof.fraction_compile) == (0.3, 0.15, 0.2)
