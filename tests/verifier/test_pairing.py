"""Paired timing and the load monitor: the pure logic (order, intervals, load figures, acceptance)."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest

from forge.core.acceptance import beats_eager, timed_while_busy
from forge.core.pairing import (
    baseline_first,
    call_order,
    median_interval_ranks,
    paired_ratio,
    side_orders,
)
from forge.core.timing_records import Contention
from forge.core.verdict import Verdict
from forge.verifier.machine.contention import BUSY_OTHER_CORES, CpuSample, LoadMonitor, combined, judged


def test_pairs_alternate_abba():
    assert [baseline_first(i) for i in range(8)] == [True, False, False, True, True, False, False, True]
    assert [baseline_first(i, 1) for i in range(4)] == [False, True, True, False]  # a mirrored batch


def _follows_itself(order: str, side: str) -> int:
    return sum(a == b == side for a, b in itertools.pairwise(order))


@pytest.mark.parametrize("pairs", [1, 2, 3, 4, 5, 10])
def test_both_sides_follow_themselves_and_open_batches_equally_often(pairs):
    """A call after its own worker's runs faster (threads awake): over every two batches each side
    gets as many of those, and opens as many batches (after both warm-ups), as the other."""
    two = [call_order(pairs, k) for k in (0, 1)]
    assert sum(_follows_itself(o, "b") for o in two) == sum(_follows_itself(o, "c") for o in two)
    assert sorted(o[0] for o in two) == ["b", "c"]
    assert call_order(2, 0) == "bccb" and call_order(2, 1) == "cbbc"


@pytest.mark.parametrize(("n", "ranks"), [(5, (0, 4)), (6, (0, 5)), (10, (1, 8)), (30, (9, 20)), (60, (21, 38))])
def test_median_interval_ranks_match_the_binomial_table(n, ranks):
    assert median_interval_ranks(n) == ranks


def test_interval_covers_the_true_ratio_about_95_percent_of_the_time():
    rng = random.Random(7)
    covered = 0
    for _ in range(400):
        eager = [rng.lognormvariate(0, 0.3) * 2.0 for _ in range(30)]
        cand = [rng.lognormvariate(0, 0.3) for _ in range(30)]
        r = paired_ratio([int(e * 1e6) for e in eager], [int(c * 1e6) for c in cand])
        assert r is not None and r.low <= r.median <= r.high
        covered += r.low <= 2.0 <= r.high
    assert 0.90 <= covered / 400 <= 0.995


def test_load_landing_on_single_calls_moves_the_paired_median_little():
    # The candidate is 2x faster; bursts make a third of the calls of either side 5x slower.
    rng = random.Random(3)
    eager, cand = [], []
    for _ in range(40):
        eager.append(int(2e6 * (5 if rng.random() < 0.33 else 1)))
        cand.append(int(1e6 * (5 if rng.random() < 0.33 else 1)))
    r = paired_ratio(eager, cand)
    assert r is not None and r.low > 1.0 and 1.5 <= r.median <= 2.5


def _sample(wall, busy, ours, steal=0.0, total=None, running=1):
    return CpuSample(wall, busy, steal, total if total is not None else 2 * wall, ours, running)


def test_other_processes_load_is_busy_time_that_is_not_forges():
    monitor = LoadMonitor([], cores=2)
    quiet = monitor.between(_sample(0, 0, 0), _sample(1.0, 1.0, 0.98))
    assert quiet is not None and not quiet.busy and quiet.other_cores == 0.0  # 2 ticks: below the floor
    busy = monitor.between(_sample(0, 0, 0), _sample(1.0, 1.9, 1.0))
    assert busy is not None and busy.busy and busy.other_cores == pytest.approx(0.9)
    assert "0.90 of 2 cores" in busy.detail
    stolen = monitor.between(_sample(0, 0, 0, 0.0, 0.0), _sample(2.0, 1.0, 1.0, 0.4, 4.0))
    assert stolen is not None and stolen.busy and stolen.steal == pytest.approx(0.1)
    assert monitor.between(None, _sample(1, 1, 1)) is None  # no /proc: nothing claimed


def test_monitor_reads_this_machine():
    monitor = LoadMonitor([], cores=2)
    a = monitor.sample()  # forge runs on Linux only: /proc is there
    assert a is not None and a.total_s > 0 and a.ours_s >= 0 and a.running >= 1


def test_the_busiest_batch_speaks_for_the_measurement():
    spans = [judged(Contention(cores=2, other_cores=0.0, retried=1)), judged(Contention(cores=2, other_cores=0.7))]
    c = combined(spans)
    assert c is not None and c.busy and c.other_cores == 0.7 and c.retried == 1
    assert combined([]) is None
    assert not judged(Contention(cores=2, other_cores=BUSY_OTHER_CORES / 2)).busy


def _paired_verdict(low: float, median: float, high: float, busy: bool = False, enforced: bool = True) -> Verdict:
    def stats(q1: float, med: float, q3: float) -> dict:
        return {"median_ms": med, "iqr_ms": q3 - q1, "q1_ms": q1, "q3_ms": q3}

    contention = {
        "cores": 2,
        "other_cores": 0.9 if busy else 0.0,
        "busy": busy,
        "enforced": enforced,
        "detail": "other processes used 0.90 of 2 cores",
    }
    return Verdict.from_json(
        {
            "status": "passed",
            "timing_stats": {
                "candidate": stats(0.9, 1.0, 1.1),
                "eager": stats(1.8, 2.0, 2.2),
                "paired_eager": {"pairs": 30, "median": median, "low": low, "high": high},
                "contention": contention,
            },
        }
    )


def test_acceptance_reads_the_paired_interval_and_the_load():
    ok, why = beats_eager(_paired_verdict(1.8, 2.0, 2.2))
    assert ok and "95% CI 1.80-2.20x over 30 pairs" in why
    ok, why = beats_eager(_paired_verdict(0.95, 2.0, 2.2))  # quartiles apart, pairs not convinced
    assert not ok and "reaches 1.0x" in why
    ok, why = beats_eager(_paired_verdict(1.8, 2.0, 2.2, busy=True))
    assert not ok and "machine was busy" in why and timed_while_busy(_paired_verdict(1, 2, 3, busy=True))
    assert beats_eager(_paired_verdict(1.8, 2.0, 2.2, busy=True, enforced=False))[0]  # load check off


def _timed_verdict() -> Verdict:
    stats = {"median_ms": 1.0, "iqr_ms": 0.1, "q1_ms": 0.95, "q3_ms": 1.05}
    return Verdict.from_json({"status": "passed", "timing_stats": {"candidate": stats, "eager": stats}})


def test_the_regime_judged_is_warm_when_one_calls_data_fits_in_half_the_cache():
    from forge.verifier.parent.timing.statistics import record_regimes

    cand = [1_000_000] * 10
    eager = [2_000_000] * 10  # warm: 2x eager
    compiled = [800_000] * 10  # warm: torch.compile beats the kernel
    small = _timed_verdict()
    record_regimes(small, cand, eager, compiled, working_set=1 << 20, cache=32 << 20)
    ts = small.timing_stats
    assert ts.regime == "warm" and small.speedup_vs_eager == 2.0 and small.speedup_vs_compile == 0.8
    assert "judged warm" in next(c.detail for c in small.checks if c.name == "regimes")
    big = _timed_verdict()
    big.speedup_vs_eager = 1.5  # the cold figure recorded before
    record_regimes(big, cand, eager, compiled, working_set=64 << 20, cache=32 << 20)
    assert big.timing_stats.regime == "cold" and big.speedup_vs_eager == 1.5
    assert big.timing_stats.warm_paired_eager is not None  # both regimes are carried


def test_a_warm_verdict_is_accepted_on_its_warm_pairs_alone():
    data = _paired_verdict(0.9, 1.05, 1.2).to_json()  # cold: within the noise
    data["timing_stats"].update(regime="warm", warm_paired_eager={"pairs": 30, "median": 1.6, "low": 1.4, "high": 1.8})
    ok, why = beats_eager(Verdict.from_json(data))
    assert ok and "1.60x" in why and "warm" in why
    data["timing_stats"]["regime"] = "cold"
    assert not beats_eager(Verdict.from_json(data))[0]


def test_two_sides_keep_abba_in_the_order_a_round_match_uses():
    for batch in (0, 1):
        flat = "".join("bc"[s] for order in side_orders(6, batch, 2) for s in order)
        assert flat == call_order(6, batch)


@pytest.mark.parametrize("sides", [3, 4])
@pytest.mark.parametrize("batch", [0, 1, 2])
@pytest.mark.parametrize("pairs", [7, 12])
def test_with_rivals_no_call_follows_its_own_side_and_every_side_opens_equally_often(sides, batch, pairs):
    """A round's candidates timed together: a call after its own worker's would run faster (its
    threads awake), so none does; over each run of ``sides`` pairs each side opens one and closes one."""
    orders = side_orders(pairs, batch, sides)
    flat = [s for order in orders for s in order]
    assert len(orders) == pairs and all(sorted(order) == list(range(sides)) for order in orders)
    assert not [i for i, (a, b) in enumerate(itertools.pairwise(flat)) if a == b]
    for start in range(0, pairs - sides + 1, sides):
        block = orders[start : start + sides]
        assert sorted(o[0] for o in block) == list(range(sides))
        assert sorted(o[-1] for o in block) == list(range(sides))


def test_a_worker_killed_between_two_samples_is_not_read_as_other_load():
    """A rival dropped mid-batch is killed: its /proc entry goes, and the end sample has no figure
    for it. Its whole lifetime's CPU must not turn into "other processes" (a busy machine)."""
    monitor = LoadMonitor([], cores=2)
    start = CpuSample(0.0, 10.0, 0.0, 20.0, 9.0, 1, ((1, 1.0), (2, 8.0)))
    # over 1 s: 1.0 s of CPU on the machine, all of it process 1's; process 2 (8 s so far) was killed
    end = CpuSample(1.0, 11.0, 0.0, 22.0, 2.0, 1, ((1, 2.0),))
    load = monitor.between(start, end)
    assert load is not None and load.other_cores == 0.0 and not load.busy
    # the old reading (sums only) would have read 8 s of other load in that second
    legacy = monitor.between(replace(start, per_pid=()), replace(end, per_pid=()))
    assert legacy is not None and legacy.busy
