"""Pure parts of the timing path: statistics, the timed loop's output handling, the output pool."""

from __future__ import annotations

import weakref

import pytest
import torch

from forge.core.timing_records import TimingStats
from forge.verifier.worker.output_copies import OutputPool
from forge.verifier.worker.timing.worker_loop import Clocks, TimedCalls, timed_loop


def test_quartiles_are_the_real_ones_for_a_skewed_sample():
    s = TimingStats.from_ns([1_000_000] * 6 + [9_000_000] * 2)  # two interference spikes
    assert s.median_ms == 1.0 and s.q1_ms == 1.0 and s.q3_ms > 1.0
    assert s.iqr_ms == s.q3_ms - s.q1_ms and s.trials == 8


def test_timed_loop_releases_each_output_after_keeping_what_it_asks_for():
    refs: list[weakref.ref[torch.Tensor]] = []
    earlier_alive: list[bool] = []

    def call(inputs):
        earlier_alive.append(any(r() is not None for r in refs))
        out = inputs[0] * 2
        refs.append(weakref.ref(out))
        return out

    sets = [[torch.full((4,), float(i))] for i in range(5)]
    clocks = Clocks(host_ns=lambda: 0, sync=lambda: None)
    run = timed_loop(call, sets, [], lambda: None, clocks, keep=lambda out: out.sum().item())
    assert run.outputs == [8.0 * i for i in range(5)] and len(run.times) == len(run.host) == 5
    assert earlier_alive == [False] * 5  # each output was gone before the next call allocated its own
    refs.clear()
    assert timed_loop(call, sets, [], lambda: None, clocks).outputs == [None] * 5  # the reference keeps nothing


class _FakeEvent:
    """Stands in for torch.cuda.Event: records the position in a shared log of device work."""

    def __init__(self, log: list[str], enable_timing: bool = True) -> None:
        self.log, self.at = log, -1

    def record(self) -> None:
        self.at = len(self.log)
        self.log.append("event")


def test_cuda_trial_queues_the_call_behind_the_flush_without_a_sync():
    """The launch must overlap the flush (no synchronize between them) and the events must time the
    call alone; the host clock spans the flush too, against events over the same span."""
    log: list[str] = []
    clock = iter(range(0, 10**9, 1000))

    def elapsed(a: _FakeEvent, b: _FakeEvent) -> float:  # ms: 1 ms of device work per log entry between
        return float(sum(1 for x in log[a.at + 1 : b.at] if x != "event"))

    clocks = Clocks(
        host_ns=lambda: next(clock),
        sync=lambda: log.append("sync"),
        event_cls=lambda enable_timing: _FakeEvent(log),
        record=_FakeEvent.record,
        elapsed=elapsed,
        cover=lambda: log.append("cover"),
    )
    run = timed_loop(lambda inp: log.append("call"), [[0], [1]], [], lambda: log.append("flush"), clocks)
    trial = log[log.index("flush") - 2 :]
    assert trial[:8] == ["sync", "event", "flush", "cover", "event", "call", "event", "sync"]
    assert run.times == [1_000_000] * 2  # the call alone
    assert run.window == [3_000_000] * 2  # flush, cover and call: what the host clock is compared with
    assert run.launch == [1000] * 2 and len(run.host) == 2


def test_output_pool_copies_values_dtypes_and_shapes():
    pool = OutputPool()
    a = torch.randn(3, 5)
    b = torch.arange(7, dtype=torch.int16)
    c = torch.randn(4, 6).t()  # not contiguous
    d = torch.tensor([True, False, True])
    copies = [pool.copy(x) for x in (a, b, c, d)]
    for x, y in zip((a, b, c, d), copies, strict=True):
        assert y is not None and y.dtype == x.dtype and y.shape == x.shape and torch.equal(x, y)
        assert y.data_ptr() != x.data_ptr()
    a.add_(1)  # a copy, not a view of the output
    assert not torch.equal(a, copies[0])
    # the copies live in the pool's buffer, each 64-byte aligned, not next to the outputs
    assert all(y.data_ptr() % 64 == 0 for y in copies if y is not None)
    assert copies[1] is not None and copies[0].untyped_storage().data_ptr() == copies[1].untyped_storage().data_ptr()
    assert pool.copy(torch.empty(0)) is not None and pool.copy("not a tensor") is None


def test_output_pool_takes_a_new_chunk_when_full():
    pool = OutputPool()
    pool._CHUNK = 1024
    first = pool.copy(torch.zeros(200))  # 800 bytes
    second = pool.copy(torch.ones(200))  # does not fit behind the first
    assert first is not None and second is not None
    assert torch.equal(first, torch.zeros(200)) and torch.equal(second, torch.ones(200))
    assert first.untyped_storage().data_ptr() != second.untyped_storage().data_ptr()


def test_garbage_collector_is_off_during_timed_calls_and_restored_after():
    import gc

    seen: list[bool] = []
    clocks = Clocks(host_ns=lambda: 0, sync=lambda: None)
    assert gc.isenabled()
    sets = [[torch.zeros(1)], [torch.zeros(1)]]
    timed_loop(lambda inp: seen.append(gc.isenabled()), sets, sets[:1], lambda: None, clocks)
    assert seen == [False] * 4 and gc.isenabled()  # the warm-up set twice, then the two timed calls
    gc.disable()
    try:  # a caller that had it off keeps it off
        timed_loop(lambda inp: None, sets, [], lambda: None, clocks)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_later_batches_collect_only_what_is_new():
    """What survives the collection before a timed loop is frozen: the next batch's collection
    does not walk it again (a full one cost ~0.15 s per batch and side with torch loaded)."""
    import gc

    clocks = Clocks(host_ns=lambda: 0, sync=lambda: None)
    survivor = [torch.zeros(1)]
    gc.unfreeze()
    try:
        timed_loop(lambda inp: None, [survivor], [], lambda: None, clocks)
        assert gc.get_freeze_count() > 0 and not any(survivor is o for o in gc.get_objects())
    finally:
        gc.unfreeze()


def test_large_inputs_get_more_batches_for_enough_trials():
    from forge.verifier.worker.reference_side import plan_batches

    assert plan_batches(30, 10) == (3, 30)  # small inputs: three batches hold every trial
    assert plan_batches(30, 8) == (3, 24)  # the batch count, not the trials, is what is capped
    assert plan_batches(30, 2) == (6, 12)  # two 64 MB sets a batch: six batches, not six trials
    assert plan_batches(30, 1) == (6, 6)
    assert plan_batches(6, 2) == (3, 6)  # a slow call's budget allows only six: no extra batches
    assert plan_batches(5, 5) == (3, 5)  # five slow calls still come in three turns (of two)
    # small inputs: memory would hold every call in one batch, but a side's calls never run in
    # one stretch (a slow spell would land on one side only)
    assert plan_batches(30, 200) == (3, 30)
    assert plan_batches(60, 200, exact=True) == (6, 60)
    assert plan_batches(60, 5, exact=True) == (12, 60)


def test_the_flop_count_does_not_import_dynamo():
    """The roofline's FLOP counter runs in every reference worker while the candidate runs its
    cases; importing torch._dynamo there cost ~2.3 s of CPU per verification on a 2-core machine."""
    import subprocess
    import sys

    script = (
        "import sys, torch\n"
        "from forge.verifier.worker.op_work import roofline\n"
        "m = torch.nn.Linear(8, 4)\n"
        "x = torch.randn(3, 8)\n"
        "flops = roofline.estimate(m, [x], [m(x)]).flops\n"
        "assert flops == 2 * 3 * 8 * 4, flops\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


def test_a_verified_candidate_past_the_bound_blames_the_estimate_not_its_result():
    """A candidate 2.5x past a DRAM bound on cache-resident data: the model of the machine is wrong
    there (its outputs were checked in every timed call), never "check the result"."""
    from forge.core.roofline_record import Roofline
    from forge.core.verdict import Verdict
    from forge.verifier.parent.timing.statistics import record_roofline, record_speedups

    v = Verdict.from_json({"status": "passed"})
    roof = Roofline(bytes=16_000_000, flops=0, bandwidth_gbs=8.0, bound_ms=2.0)
    record_speedups(v, [800_000] * 20, [1_600_000] * 20, [], None)
    record_roofline(v, roof)
    (check,) = [c for c in v.checks if c.name == "roofline"]
    assert not check.passed and not check.fatal and v.roofline is not None and v.roofline.fraction_candidate == 2.5
    assert "the model of the machine is wrong here, not the result" in check.detail, check.detail
    assert "check the result" not in check.detail and "plausible" not in check.detail


def test_a_peak_eagers_own_call_beats_is_raised_to_eagers_rate():
    """A GEMM benchmark that missed the library's best kernel: eager's whole call did the op's
    FLOPs faster than the measured peak allows. The bound then takes eager's rate (a peak that a
    library call exceeds bounds nothing) and says so; a peak eager stays under is kept."""
    from forge.core.roofline_record import Roofline
    from forge.core.verdict import Verdict
    from forge.verifier.parent.timing.statistics import record_roofline, record_speedups

    # 2 GFLOP at a measured 100 GFLOP/s: a 20 ms bound, where eager took 10 ms
    roof = Roofline(bytes=1_000_000, flops=2_000_000_000, bandwidth_gbs=20.0, peak_gflops=100.0, bound_ms=20.0)
    v = Verdict.from_json({"status": "passed"})
    record_speedups(v, [8_000_000] * 20, [10_000_000] * 20, [], None)
    record_roofline(v, roof)
    assert v.roofline is not None and v.roofline.peak_gflops == 200.0 and v.roofline.measured_peak_gflops == 100.0
    assert v.roofline.bound_ms == 10.0 and v.roofline.fraction_eager == 1.0 and v.roofline.fraction_candidate == 1.25
    assert v.roofline.bound_by == "eager's own matmul rate, above the measured peak"
    slower = Verdict.from_json({"status": "passed"})
    record_speedups(slower, [20_000_000] * 20, [40_000_000] * 20, [], None)
    record_roofline(slower, roof)
    assert slower.roofline is not None and slower.roofline.peak_gflops == 100.0
    assert slower.roofline.measured_peak_gflops is None and slower.roofline.bound_by == "measured matmul peak"


def test_transcendental_work_is_counted_apart_from_matmul_flops():
    """A cross-entropy-like op makes one exp per element: 0 matmul FLOPs is not 0 work, and the
    verdict's roofline line and the brief say how many transcendental evaluations one call makes."""
    from forge.core.roofline_record import Roofline
    from forge.verifier.worker.op_work import roofline

    class SoftCE(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(x).log_softmax(dim=-1).exp().sum(dim=-1)

    x = torch.randn(64, 128)
    model = SoftCE()
    call = roofline.estimate(model, [x], [model(x)])
    nbytes, flops, transcendentals = call.bytes, call.flops, call.transcendentals
    assert flops == 0 and transcendentals == 3 * 64 * 128, transcendentals  # gelu, log_softmax, exp
    note = Roofline(bytes=nbytes, flops=flops, transcendentals=transcendentals).transcendental_note
    assert note == ", 0.02 M transcendental evaluations (exp, log, tanh, ...: not in the bound)", note


def test_judged_warm_the_bound_is_the_last_level_caches():
    """One call's data fits in half the last-level cache: judged warm, the bound is the cache's
    copy bandwidth (measured with the figures), not DRAM's, and the prompts may use it."""
    from forge.core.figures import judged_roofline
    from forge.core.roofline_record import Roofline
    from forge.core.verdict import Verdict
    from forge.verifier.parent.timing.statistics import record_regimes, record_roofline, record_speedups

    v = Verdict.from_json({"status": "passed"})
    roof = Roofline(bytes=4_000_000, flops=0, bandwidth_gbs=20.0, bound_ms=0.2, cache_bandwidth_gbs=100.0)
    roof.cache_bound_ms = 0.04
    record_speedups(v, [100_000] * 20, [200_000] * 20, [], None)
    record_regimes(v, [80_000] * 20, [120_000] * 20, [], working_set=4_000_000, cache=32_000_000)
    record_roofline(v, roof)
    assert v.roofline is not None and v.roofline.level == "cache" and v.roofline.bound_ms == 0.04
    assert v.roofline.fraction_candidate == 0.5  # 0.04 ms of the warm candidate's 0.08 ms
    assert v.roofline.fraction_eager == round(0.04 / (0.08 * 1.5), 4)  # eager's warm time from the pairs
    assert v.roofline.bound_by == "measured in-cache bandwidth"
    (check,) = [c for c in v.checks if c.name == "roofline"]
    said = "from 100.0 GB/s, measured for a copy that stays in the last-level cache (judged warm)"
    assert said in check.detail and check.passed
    assert judged_roofline(v) is v.roofline
    dram_only = Verdict.from_json({"status": "passed"})
    record_speedups(dram_only, [100_000] * 20, [200_000] * 20, [], None)
    record_regimes(dram_only, [80_000] * 20, [120_000] * 20, [], working_set=4_000_000, cache=32_000_000)
    record_roofline(dram_only, Roofline(bytes=4_000_000, bandwidth_gbs=20.0, bound_ms=0.2))
    assert dram_only.roofline is not None and dram_only.roofline.level is None
    assert judged_roofline(dram_only) is None  # warm with DRAM's bound only: it bounds nothing


def test_an_op_that_only_reads_is_bound_by_the_read_bandwidth_and_a_copy_by_a_copys():
    """A copy's figure counts its reads and writes: an op that reads much and writes little (a row
    reduction) ran at 93% of a bound built from it while reading its input twice, and a kernel then
    beat that bound's "at most 1.08x" by 1.82x. With the read bandwidth measured, reads are charged
    at it and each written byte at what a copy's write costs beyond its read."""
    from forge.core.roofline_record import Roofline
    from forge.verifier.worker.op_work import roofline

    copy_gbs, read_gbs, mb = 25.0, 50.0, 16_000_000
    copy_ms = roofline.bound_ms(2 * mb, 0, copy_gbs, 300.0, read=mb, read_gbs=read_gbs)
    assert copy_ms == pytest.approx(2 * mb / (copy_gbs * 1e9) * 1e3)  # a copy: exactly a copy's time
    reduce_ms = roofline.bound_ms(mb + 16_000, 0, copy_gbs, 300.0, read=mb, read_gbs=read_gbs)
    assert reduce_ms == pytest.approx(0.32 + 16_000 * (2 / 25e9 - 1 / 50e9) * 1e3)  # about half the copy's bound
    assert roofline.bound_ms(mb, 0, copy_gbs, 300.0) == pytest.approx(0.64)  # no read figure: as before
    # a read measured below a copy's counted rate (a sum is a lower bound on reading) counts as the copy's
    assert roofline.bound_ms(mb, 0, copy_gbs, 300.0, read=mb, read_gbs=10.0) == pytest.approx(0.64)

    class RowRange(torch.nn.Module):
        def forward(self, x):
            return x.amax(dim=-1) - x.amin(dim=-1)

    x = torch.randn(256, 64)
    model = RowRange()
    nbytes = roofline.estimate(model, [x], [model(x)]).bytes
    assert roofline.bytes_read(model, [x]) == 256 * 64 * 4 and nbytes == 256 * 64 * 4 + 256 * 4
    # what bounds an op follows the same model: 16 MB read at 50 GB/s (0.32 ms) is under 150 MFLOP at
    # 300 GFLOP/s (0.5 ms), where a copy's 25 GB/s alone (0.64 ms) said memory
    roof = Roofline(bytes=mb, bytes_read=mb, flops=150_000_000, bandwidth_gbs=25.0, peak_gflops=300.0)
    assert roof.bound_by == "measured memory bandwidth"
    roof.read_bandwidth_gbs = 50.0
    assert roof.bound_by == "measured matmul peak"


class _ContentMemo:
    """A candidate that keeps its last result and returns it again when its input's contents
    are unchanged (keyed on the bytes: pointers and versions would be easier to fool)."""

    def __init__(self) -> None:
        self.key: bytes | None = None
        self.result: torch.Tensor | None = None
        self.seen: list[float] = []
        self.computed = 0

    def __call__(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        x = inputs[0]
        self.seen.append(float(x[0]))
        key = x.numpy().tobytes()
        if key != self.key or self.result is None:
            self.key, self.result = key, x * 2
            self.computed += 1
        return self.result.clone()


def test_a_warm_trial_is_called_back_to_back_and_a_result_kept_from_the_call_before_is_not_its_own():
    clocks = Clocks(host_ns=lambda: 0, sync=lambda: None)
    memo = _ContentMemo()
    calls = TimedCalls(memo, lambda: None, clocks, keep=lambda out: out.clone(), warm=True)
    sets = [[torch.full((8,), float(k))] for k in (1, 2, 3)]
    calls.begin(sets, [])
    warmup_calls, computed_before = len(memo.seen), memo.computed
    for s in sets:
        calls.one(s)
    run = calls.end()
    # each trial: its values negated for the untimed call before, then its own values, timed
    assert memo.seen[warmup_calls:] == [-1.0, 1.0, -2.0, 2.0, -3.0, 3.0]
    assert memo.computed - computed_before == 6  # no timed call found the call before's result
    assert [float(o[0]) for o in run.outputs] == [2.0, 4.0, 6.0]  # the trials' own values, back in place
    assert calls.buffers is not None and torch.equal(calls.buffers[0], sets[-1][0])


def test_a_cold_trial_has_no_call_before():
    clocks = Clocks(host_ns=lambda: 0, sync=lambda: None)
    memo = _ContentMemo()
    calls = TimedCalls(memo, lambda: None, clocks, warm=False)
    sets = [[torch.full((8,), float(k))] for k in (1, 2)]
    calls.begin(sets, sets[:1])
    warmup_calls = len(memo.seen)
    for s in sets:
        calls.one(s)
    calls.end()
    assert memo.seen[warmup_calls:] == [1.0, 2.0]
