"""Training steps with a training kernel from the bank, end to end: ``forge optimize
examples/training/rmsnorm_op.py --train`` in a fresh bank (the built-in coder's kernels with their
backward, verified for gradients, training steps timed), then ``examples/training/train_loop.py``
in fresh processes: a network with the user's RMSNorm twice, trained for N steps eager, kernelized
and compiled. Prints the op's figures as banked (forward and training step, against eager and
torch.compile) and, per process, the losses' agreement and each variant's step time.

Usage: python -m benchmarks.model_runs.training_steps [--rounds 2] [--processes 3] [--steps 30]
       [--page docs/benchmarks/training-steps.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.core.timing_records import PairedRatio
from forge.core.verdict import Verdict
from forge.db import kernel_detail, list_kernels, open_bank

EXAMPLE = ROOT / "examples" / "training"


def _ratio(r: PairedRatio | None) -> str:
    return f"{r.median:.2f}x ({r.low:.2f}-{r.high:.2f})" if r else "—"


def _bank(bank: Path, rounds: int) -> tuple[Verdict, bool]:
    """The optimize run's banked entry: its evidence, and whether it is used under autograd (or
    exits saying why nothing was banked)."""
    cmd = [sys.executable, "-m", "forge", "optimize", "rmsnorm_op.py", "--train", "--rounds", str(rounds)]
    done = subprocess.run([*cmd, "--bank", str(bank), "--json"], cwd=EXAMPLE, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"forge optimize failed ({done.returncode}):\n{done.stderr[-3000:]}")
    (problem,) = json.loads(done.stdout)["problems"]
    if not problem["accepted"]:
        raise SystemExit(f"nothing banked: {problem['reason']}")
    with open_bank(bank) as engine:
        (kernel,) = list_kernels(engine)
        return kernel_detail(engine, kernel.id).evidence, kernel.trains


def _loop(bank: Path, steps: int) -> dict[str, Any]:
    cmd = [sys.executable, "train_loop.py", str(bank), "--steps", str(steps), "--json"]
    done = subprocess.run(cmd, cwd=EXAMPLE, capture_output=True, text=True)
    if not done.stdout.strip():
        raise SystemExit(f"train_loop.py printed nothing ({done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="forge optimize rounds")
    ap.add_argument("--processes", type=int, default=3, help="fresh processes running the training loop")
    ap.add_argument("--steps", type=int, default=30, help="training steps per process (5 of them warm-up)")
    add_page_option(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="forge-training-") as tmp:
        bank = Path(tmp) / "bank.db"
        verdict, used = _bank(bank, args.rounds)
        regime = verdict.timing_stats.regime or "cold"
        forward = verdict.timing_stats.headline_pairs()
        steps = verdict.training_step.headline() if verdict.training_step is not None else (None, None)
        print(f"## The op: train_rmsnorm (4096x1024), forge optimize --train --rounds {args.rounds}\n")
        print("| timed | x eager | x torch.compile |")
        print("|---|---|---|")
        print(f"| forward ({regime}) | {_ratio(forward[0])} | {_ratio(forward[1])} |")
        print(f"| training step: forward and backward ({regime}) | {_ratio(steps[0])} | {_ratio(steps[1])} |")
        print(f"\nused under autograd: {used}\n")
        print(f"## The training loop: {args.processes} fresh processes, {args.steps} steps each\n")
        columns = ["process", "kernel calls", "fallbacks", "losses vs eager (max rel.)", "eager ms", "kernelized ms"]
        print("| " + " | ".join([*columns, "compiled ms"]) + " |")
        print("|---|---|---|---|---|---|---|")
        ratios: dict[str, list[float]] = {"kernelized": [], "compiled": []}
        ok = True
        for k in range(args.processes):
            r = _loop(bank, args.steps)
            ok = ok and bool(r["ok"])
            t = r["times"]
            for name in ratios:
                ratios[name].append(t["eager"]["median_ms"] / t[name]["median_ms"])
            ms = " | ".join(f"{t[name]['median_ms']:.1f}" for name in ("eager", "kernelized", "compiled"))
            print(f"| {k + 1} | {r['kernel_calls']} | {r['fallbacks']} | {r['kernelized_max_rel_diff']:.1e} | {ms} |")
        for name, values in ratios.items():
            print(
                f"\n{name}: {statistics.median(values):.2f}x eager's step (median of {len(values)} processes; "
                f"range {min(values):.2f}-{max(values):.2f})"
            )
        print("\nlosses equal eager's within 1e-4 at every step, every kernel call ran the kernel: " + str(ok))
        return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Training steps with a training kernel"))
