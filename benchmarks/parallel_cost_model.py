"""How well forge's cost model predicts a plan's step time on this machine, before and after it is
calibrated from real runs.

For the small transformer of the tests (tests/parallel/ops/tiny_transformer.py; larger with
``--hidden``), several plans over 2 and 4 local gloo ranks: the model's prediction (FLOPs at this
CPU's measured one-thread matmul peak, collectives at the measured loopback all-reduce bandwidth),
the real run's step (median of ``--steps``, slowest rank), and the relative error. Calibration is
fitted on all runs (least squares, one factor per term); the mean error is printed before and after.

Usage: python benchmarks/parallel_cost_model.py [--steps 5] [--repeats 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

from forge.core.importing import import_file
from forge.core.parallel_plan import FsdpSettings, ParallelPlan, TpRule, TpStyle
from forge.core.settings import ForgeSettings
from forge.parallel import Calibration, Machine, measure_link, model_facts, predict, run_plan
from forge.verifier.machine import measured_figures

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test model lives in tests/parallel
OP = ROOT / "tests" / "parallel" / "ops" / "tiny_transformer.py"
MEGATRON = [
    TpRule(pattern="blocks.*.attn.[qkv]", style=TpStyle.COLWISE),
    TpRule(pattern="blocks.*.attn.proj", style=TpStyle.ROWWISE),
    TpRule(pattern="blocks.*.mlp.up", style=TpStyle.COLWISE),
    TpRule(pattern="blocks.*.mlp.down", style=TpStyle.ROWWISE),
]
PLANS = {
    # not a valid plan (the static rules refuse dp without FSDP): shows that the real run refuses it too
    "dp2 without fsdp": (ParallelPlan(mesh={"dp": 2}), 2),
    "tp2": (ParallelPlan(mesh={"tp": 2}, tp=MEGATRON), 2),
    "dp2 fsdp": (ParallelPlan(mesh={"dp": 2}, fsdp=FsdpSettings(units=["blocks.*"])), 2),
    "tp4": (ParallelPlan(mesh={"tp": 4}, tp=MEGATRON), 4),
    "dp2 x tp2 fsdp": (ParallelPlan(mesh={"dp": 2, "tp": 2}, tp=MEGATRON, fsdp=FsdpSettings(units=["blocks.*"])), 4),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    settings = ForgeSettings()
    peak = measured_figures("cpu", 1, settings.cache_path()).peak_gflops * 1e9
    with tempfile.TemporaryDirectory() as tmp:
        link = measure_link(Path(tmp) / "link.json")
    machine = Machine(peak_flops=peak, link_bytes_per_s=link.bytes_per_s, latency_s=link.latency_s)
    print(f"machine: {peak / 1e9:.0f} GFLOP/s per rank (one thread), loopback all-reduce {link.bytes_per_s / 1e9:.2f} "
          f"GB/s, {link.latency_s * 1e6:.0f} us per collective")  # fmt: skip
    op = import_file("tiny_transformer_op", OP)
    torch.manual_seed(0)
    model = op.Model()
    facts = model_facts(model, op.get_inputs())
    calib = Calibration()
    rows = []
    for name, (plan, world) in PLANS.items():
        p = predict(facts, plan, machine, model, train=True)
        run = run_plan(OP, plan, world, steps=a.steps, timeout_s=300)
        if not run.ok or run.step_ms is None:
            print(f"{name}: the real run failed: {run.reason}")
            continue
        measured = run.step_ms / 1000
        calib.add(p, measured)
        rows.append((name, p, measured))
    print(f"{'plan':28s} {'predicted ms (compute+comm)':>28s} {'measured ms':>12s} {'error':>7s} {'calibrated':>11s}")
    for name, p, t in rows:
        raw, cal = p.step_s, calib.step_s(p)
        print(f"{name:28s} {raw * 1e3:9.2f} ({p.compute_s * 1e3:.2f}+{p.comm_s * 1e3:.2f}) {t * 1e3:12.2f} "
              f"{(raw - t) / t:+7.0%} {(cal - t) / t:+11.0%}")  # fmt: skip
    before, after = calib.error(calibrated=False), calib.error()
    print(f"mean relative error: {before:.0%} before calibration, {after:.0%} after "
          f"(factors: compute x{calib.compute:.2f}, communication x{calib.comm:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
