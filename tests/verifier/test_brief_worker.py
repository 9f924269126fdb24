"""What the op brief's worker reads off the op itself (in its own process, as a session runs it;
no timing asserted): the weights a second initialisation perturbs, the buffers it leaves as the
constructor made them, and the machine figures its roofline reads."""

from __future__ import annotations

import re

from forge.verifier.briefing.measure import measure_op_brief
from forge.verifier.machine import facts as machine
from forge.verifier.machine.figures import MachineFigures
from forge.verifier.machine.readings import WorkingSetBandwidth

OP = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(8))
        self.register_buffer("weight", torch.linspace(0.5, 1.5, 8))  # class weights: a checkpoint's own
        self.register_buffer("scratch", torch.zeros(8), persistent=False)  # not loaded: not the candidate's to read
        self.register_buffer("count", torch.zeros((), dtype=torch.long))  # not floating

    def forward(self, x):
        return x * self.weight * self.scale


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


def test_the_brief_counts_the_weights_and_names_the_loaded_floating_buffers(tmp_path, fast_settings):
    op = tmp_path / "buffered.py"
    op.write_text(OP)
    brief = measure_op_brief(op, "buffered-op", "cpu", fast_settings.model_copy(update={"compile_baseline": False}))
    assert brief.weights == 8
    assert brief.buffers == ["weight (8 elements)"]
    # measured in the brief's (sandboxed) process: a C++ call passing the op's input and output
    (cost,) = [fact for fact in brief.runtime if fact.startswith("forge.cpp's fixed cost here")]
    assert "a call passing 2 tensors and an int" in cost, cost
    # no exp, log, tanh, ... in its math: no transcendental rates
    assert not [fact for fact in brief.runtime if fact.startswith("transcendental functions here")]


EXPS = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x) * torch.exp(x)


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
"""


def test_an_op_of_exps_is_told_this_cpus_transcendental_rates_and_its_own_evaluations_cost(tmp_path, fast_settings):
    op = tmp_path / "exps.py"
    op.write_text(EXPS)
    brief = measure_op_brief(op, "exps-op", "cpu", fast_settings.model_copy(update={"compile_baseline": False}))
    assert brief.roofline is not None and brief.roofline.transcendentals == 2 * 64 * 128, brief.missing
    (said,) = [fact for fact in brief.runtime if fact.startswith("transcendental functions here")]
    rates = dict(re.findall(r"\b(exp|tanh|sigmoid|erf|log1p|log) (\d+\.\d+)\b", said))
    assert set(rates) == {"exp", "tanh", "sigmoid", "erf", "log", "log1p"}, said
    # the floor is the op's evaluations at the fastest rate listed
    fastest = max(float(r) for r in rates.values())
    floor = float(re.search(r"a call \(the reference's count\), (\d+\.\d+) ms", said).group(1))
    assert "this op evaluates 0.02 M a call" in said
    # the rates are said to one decimal (0.5 for 0.46 on a loaded machine): the floor is within that rounding
    least, most = (2 * 64 * 128 / ((fastest + d) * 1e9) * 1e3 for d in (0.05, -0.05))
    assert least - 0.0001 <= floor <= most + 0.0001, said


def test_the_briefs_roofline_reads_the_sessions_figures_not_the_workers_own(tmp_path, fast_settings, monkeypatch):
    """The brief's process has a cache of its own, whose figures it would measure in its process
    (under the session's load, and never rechecked): the roofline it writes must use the figures
    the session checked, which the verdicts' rooflines read too."""
    at_1mib = WorkingSetBandwidth(1 << 20, copy_gbs=31.0, read_gbs=33.0)
    session = MachineFigures("this machine|2", 12.5, 250.0, cache_bandwidth_gbs=30.0, working_sets=(at_1mib,))
    monkeypatch.setattr(machine, "measured_figures", lambda *_: session)
    op = tmp_path / "buffered.py"
    op.write_text(OP)
    brief = measure_op_brief(
        op, "buffered-op-hash", "cpu", fast_settings.model_copy(update={"compile_baseline": False})
    )
    assert brief.roofline is not None, brief.missing
    # the op's working set is under 1 MiB: the smallest working set's bandwidths, as the session measured them
    assert (brief.roofline.bandwidth_gbs, brief.roofline.cache_bandwidth_gbs) == (12.5, 31.0)
    assert (brief.roofline.cache_read_bandwidth_gbs, brief.roofline.cache_working_set) == (33.0, 1 << 20)
    assert brief.roofline.peak_gflops == 250.0


def test_the_brief_times_eager_in_the_regime_its_verdicts_are_judged_in(monkeypatch):
    """Warm: every call on the same buffers, the next set's values written into them and an
    untimed call on them negated just before (as the workers' warm trial); cold: each call on a set
    of its own. The regime is the verifier's rule: warm when one call's inputs and outputs fit in
    half the last-level cache."""
    import torch

    from forge.verifier.briefing import brief_worker
    from forge.verifier.briefing.regime_timing import regime_times_ms

    sets = [[torch.full((64,), float(i))] for i in range(3)]
    seen: list[tuple[int, float]] = []

    def eager(xs):
        seen.append((xs[0].data_ptr(), float(xs[0][0])))

    for warm in (True, False):
        seen.clear()
        regime_times_ms({"eager": eager}, sets, warm, "cpu", 6)
        timed = seen[-11::2] if warm else seen[-6:]  # after the warm-up calls (and, warm, each call before)
        assert [v for _, v in timed] == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
        if warm:
            assert [v for _, v in seen[-12::2]] == [-0.0, -1.0, -2.0, -0.0, -1.0, -2.0]
        pointers = {p for p, _ in timed}
        assert (
            (pointers.isdisjoint({s[0].data_ptr() for s in sets}) and len(pointers) == 1)
            if warm
            else (pointers == {s[0].data_ptr() for s in sets})
        )
    x, y = torch.zeros(1024), torch.zeros(1024)  # 8 KiB in all
    monkeypatch.setattr(brief_worker.machine, "last_level_cache_bytes", lambda device: 16 << 10)
    assert brief_worker._judged_warm([x], [y], "cpu")
    monkeypatch.setattr(brief_worker.machine, "last_level_cache_bytes", lambda device: 8 << 10)
    assert not brief_worker._judged_warm([x], [y], "cpu")


def test_the_briefs_regime_is_the_verifiers_whatever_state_the_module_holds(monkeypatch):
    """Inputs and outputs exactly half the last-level cache, and a 128-byte buffer beside them (a
    rotary op's frequencies): the verifier judges it warm (its rule counts inputs and outputs), and
    so must the brief's regime and its roofline's level (it said cold and charged DRAM)."""
    import torch

    from forge.verifier.briefing import brief_worker

    class Rotary(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("inv_freq", torch.ones(32))

        def forward(self, x):
            return x * self.inv_freq[0]

    x = torch.randn(64, 64)
    out = Rotary()(x)
    half = x.numel() * 4 + out.numel() * 4
    monkeypatch.setattr(brief_worker.machine, "last_level_cache_bytes", lambda device: 2 * half)
    at_1mib = WorkingSetBandwidth(1 << 20, copy_gbs=31.0, read_gbs=33.0)
    figures = MachineFigures("this machine|2", 12.5, 250.0, cache_bandwidth_gbs=30.0, working_sets=(at_1mib,))
    brief = brief_worker.OpBrief(device="cpu")
    brief_worker._add_roofline(brief, Rotary(), ([x], [torch.randn(64, 64)]), [out], figures)
    assert brief.roofline is not None, brief.missing
    assert brief.roofline.bytes is not None and brief.roofline.bytes > half  # the buffer is counted as traffic
    assert brief.regime == "warm" and brief.roofline.level == "cache", (brief.regime, brief.roofline)
