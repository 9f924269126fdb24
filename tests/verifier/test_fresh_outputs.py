"""An output the allocator maps anew on every call (a CPU tensor of 32 MiB or more) is written at
the machine's measured rate for a fresh mapping, and the bound says so: such an output's page
faults are in every call of a user's loop, and in the workers' timed calls too
(``timing.heap_room``), so a bound that priced its writes as a copy's was one no kernel could reach
(an elementwise product of two 64 MiB tensors: bound 6.5 ms, every kernel 15.7 ms)."""

from __future__ import annotations

import pytest
import torch

from forge.agents.llm.prompts import render
from forge.core.op_brief import EagerProfile, OpBrief
from forge.core.roofline_record import Roofline, memory_s
from forge.core.verdict import Verdict
from forge.verifier.machine.figures import MachineFigures
from forge.verifier.parent.timing.statistics import record_roofline, record_speedups
from forge.verifier.worker.op_work import roofline

MIB = 1 << 20


class Product(torch.nn.Module):
    def forward(self, x, y):
        return x * y


def _figures(fresh_gbs: float | None) -> MachineFigures:
    return MachineFigures("cpu", 20.0, 300.0, fresh_write_gbs=fresh_gbs)


def test_only_cpu_storages_of_the_mmap_threshold_or_more_that_no_input_holds_are_counted_fresh():
    small, large = torch.empty(31 * MIB // 4), torch.empty(32 * MIB // 4)
    assert roofline.fresh_output_bytes([small]) == 0
    assert roofline.fresh_output_bytes([small, large, 3]) == 32 * MIB
    assert roofline.fresh_output_bytes([large[: MIB // 4], large[MIB // 4 :]]) == 32 * MIB  # one storage, viewed twice
    assert roofline.fresh_output_bytes([large], sources=[large]) == 0  # an input returned, or written in place
    assert roofline.fresh_output_bytes([large.view(-1, 2)], sources=[large]) == 0


def test_the_bound_is_the_larger_of_the_fresh_writes_and_all_the_traffic():
    """Reads overlap the faults in part: the bound takes the larger, never the sum, and a fresh
    write counts at least as a touched one (a fast fresh rate never lowers the bound)."""
    everything = memory_s(128 * MIB, 64 * MIB, 20.0, None)
    assert memory_s(128 * MIB, 64 * MIB, 20.0, None, fresh=64 * MIB, fresh_gbs=4.0) == pytest.approx(64 * MIB / 4e9)
    assert memory_s(128 * MIB, 64 * MIB, 20.0, None, fresh=64 * MIB, fresh_gbs=1000.0) == pytest.approx(everything)
    assert everything == pytest.approx(128 * MIB / 20e9)


def _product_call() -> roofline.CallEstimate:
    x, y = torch.ones(16 * MIB), torch.ones(16 * MIB)  # 64 MiB each, and a 64 MiB product
    return roofline.estimate(Product(), [x, y], [x * y])


def test_a_64_mib_product_is_bounded_by_writing_its_output_fresh():
    call = _product_call()
    assert call.fresh_bytes == 64 * MIB
    measured = roofline.record(call, _figures(4.0), None)
    assert (measured.fresh_bytes, measured.fresh_write_gbs) == (64 * MIB, 4.0)
    assert measured.bound_ms == pytest.approx(64 * MIB / 4e9 * 1e3, rel=1e-4)
    assert measured.bound_by == "the measured rate of writing memory mapped fresh"
    older = roofline.record(call, _figures(None), None)  # figures kept by a forge that did not measure it
    assert older.fresh_bytes is None and older.bound_ms == pytest.approx(192 * MIB / 20e9 * 1e3, rel=1e-4)


def test_the_verdict_and_the_brief_say_the_output_is_mapped_fresh():
    rec = roofline.record(_product_call(), _figures(4.0), None)
    v = Verdict.from_json({"status": "passed"})
    record_speedups(v, [20_000_000] * 20, [20_000_000] * 20, [], None)
    record_roofline(v, rec)
    (check,) = [c for c in v.checks if c.name == "roofline"]
    assert "mapped fresh by the allocator on every call" in check.detail and "4.0 GB/s" in check.detail
    eager = EagerProfile(median_ms=20.0, calls=21, regime="cold", ops=[])
    brief = OpBrief(device="cpu", eager=eager, roofline=Roofline.model_validate(rec.model_dump()), regime="cold")
    text = render("brief.j2", brief=brief)
    assert "67.11 MB of output (tensors of 32 MiB or more) are mapped fresh" in text
    plain = rec.model_copy(update={"fresh_bytes": None})
    assert "mapped fresh" not in render("brief.j2", brief=brief.model_copy(update={"roofline": plain}))
