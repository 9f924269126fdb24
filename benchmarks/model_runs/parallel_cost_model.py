"""How well forge's cost model predicts a plan's step time on this machine, before and after it is
calibrated from real runs.

Every plan the built-in search considers for a model on 2 and 4 local gloo ranks (those the static
rules pass): the model's prediction (FLOPs at this CPU's measured one-thread matmul peak,
collectives at the measured loopback all-reduce bandwidth and latency), the real run's step
(median of ``--steps``, slowest rank), and the relative error. Three figures of the mean relative
error: uncalibrated; calibrated on every run (what a session's table shows once it has them all);
and leave-one-out (each run predicted by the factors fitted on the others: how well a calibrated
model predicts a plan it has not seen, the honest figure).

Usage: python -m benchmarks.model_runs.parallel_cost_model [--model examples/models/transformer.py] [--steps 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.core.importing import import_file
from forge.core.settings import ForgeSettings
from forge.parallel import Calibration, Machine, Prediction, candidate_plans, measure_link, model_facts, screen
from forge.parallel.mesh_run import run_plan
from forge.verifier.machine.facts import available_cores, measured_figures


def _machine() -> Machine:
    peak = measured_figures("cpu", 1, ForgeSettings().cache_path()).peak_gflops * 1e9
    with tempfile.TemporaryDirectory() as tmp:
        link = measure_link(Path(tmp) / "link.json")
    print(
        f"machine: {peak / 1e9:.0f} GFLOP/s per rank (one thread), loopback all-reduce {link.bytes_per_s / 1e9:.2f} "
        f"GB/s, {link.latency_s * 1e6:.0f} us per collective"
    )
    return Machine(
        peak_flops=peak, link_bytes_per_s=link.bytes_per_s, latency_s=link.latency_s, cores=available_cores()
    )


def _leave_one_out(rows: list[tuple[str, Prediction, float]]) -> float | None:
    errors = []
    for i, (_name, p, t) in enumerate(rows):
        fit = Calibration()
        for j, (_n, q, s) in enumerate(rows):
            if j != i:
                fit.add(q, s)
        if fit.seen:
            errors.append(abs(fit.step_s(p) - t) / t)
    return sum(errors) / len(errors) if errors else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=ROOT / "examples" / "models" / "transformer.py")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--worlds", default="2,4")
    add_page_option(ap)
    a = ap.parse_args()
    machine = _machine()
    op = import_file("cost_model_subject", a.model)
    torch.manual_seed(0)
    model, inputs = op.Model(*op.get_init_inputs()), op.get_inputs()
    facts = model_facts(model, inputs)
    calib, rows = Calibration(), []
    for world in (int(w) for w in a.worlds.split(",")):
        for plan in candidate_plans(model, inputs, world):
            s = screen(model, inputs, plan, facts, machine, world_size=world, train=True, memory_limit_bytes=None)
            name = f"{plan.mesh_text()} {plan.note}"
            if s.refused is not None or s.prediction is None:
                print(f"{name}: refused by the static rules: {s.refused}")
                continue
            run = run_plan(a.model, plan, world, steps=a.steps, timeout_s=300)
            if not run.ok or run.step_ms is None:
                print(f"{name}: the real run failed: {run.reason}")
                continue
            calib.add(s.prediction, run.step_ms / 1000)
            rows.append((name, s.prediction, run.step_ms / 1000))
    print(f"\n{'plan':64s} {'predicted ms (compute+comm)':>28s} {'measured':>9s} {'error':>7s} {'calibrated':>10s}")
    for name, p, t in rows:
        raw, cal = p.step_s, calib.step_s(p)
        print(
            f"{name[:64]:64s} {raw * 1e3:9.1f} ({p.compute_s * 1e3:6.1f}+{p.comm_s * 1e3:6.1f}) {t * 1e3:9.1f} "
            f"{(raw - t) / t:+7.0%} {(cal - t) / t:+10.0%}"
        )
    loo = _leave_one_out(rows)
    print(
        f"\nmean relative error over {len(rows)} runs: {calib.error(calibrated=False):.0%} uncalibrated, "
        f"{calib.error():.0%} calibrated on all of them, {loo:.0%} leave-one-out "
        f"(factors: compute x{calib.compute:.2f}, communication x{calib.comm:.2f})"
    )


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "The parallel-plan cost model against real runs"))
