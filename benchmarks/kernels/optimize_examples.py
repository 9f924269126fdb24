"""`forge optimize` with the built-in agent over every shipped example: what the search finds.

For each op: the first candidate's speedup (the coder's default config), the winner's speedup in
the round that chose it, the accepted kernel's speedup vs eager and vs torch.compile as its
confirmation measured them (timed again after the choice: what the session reports and banks),
the config the tuner settled on, and attempts.
Ends with geometric means. Uses a throw-away bank. Usage:
    python -m benchmarks.kernels.optimize_examples [--rounds N] [--device cpu|cuda] [--no-compile-baseline] [OPS ...]
On cuda the built-in coder writes Triton and the verifier times with CUDA events.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.core.settings import load_settings
from forge.db import kernel_detail, list_kernels, open_bank
from forge.harness import OptimizeOptions, optimize
from forge.harness import events as ev


def times(x: float | None) -> str:
    return f"{x:.2f}x" if x else "-"


def geo(xs: list[float]) -> str:
    return f"{math.exp(sum(map(math.log, xs)) / len(xs)):.2f}x" if xs else "-"


def _describe(device: str) -> str:
    if device == "cuda":
        import torch

        return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    import os

    from forge.verifier.machine.facts import cpu_model

    return f"{cpu_model()}, {os.cpu_count()} cores"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ops", nargs="*", type=Path, default=[ROOT / "examples" / "ops"])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--no-compile-baseline", action="store_true")
    add_page_option(ap)
    a = ap.parse_args()
    settings = load_settings(device=a.device, compile_baseline=not a.no_compile_baseline)
    print(f"device: {_describe(a.device)}", flush=True)
    first: dict[str, float | None] = {}
    in_round: dict[int, float | None] = {}  # attempt id -> its round's speedup vs eager
    chosen: dict[str, float | None] = {}  # op -> the banked attempt's round speedup

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.VerdictReady):
            first.setdefault(e.problem, e.speedup_vs_eager)
            in_round[e.attempt_id] = e.speedup_vs_eager
        elif isinstance(e, ev.KernelAccepted):
            chosen[e.problem] = in_round.get(e.attempt_id)

    with tempfile.TemporaryDirectory() as tmp:
        bank = Path(tmp) / "bench.db"
        t0 = time.monotonic()
        run = optimize(a.ops, OptimizeOptions(rounds=a.rounds, bank=bank), settings, on_event)
        elapsed = time.monotonic() - t0
        with open_bank(bank) as engine:
            configs = {k.op: kernel_detail(engine, k.id).configs for k in list_kernels(engine)}
    head = ("op", "accepted", "first x eager", "in round", "x eager", "x compile", "attempts", "config")
    print(
        f"{head[0]:16s} {head[1]:8s} {head[2]:>13s} {head[3]:>8s} {head[4]:>8s} {head[5]:>9s} {head[6]:>8s}  {head[7]}"
    )
    eager, compiled = [], []
    for r in run.results:
        f = first.get(r.problem)
        cfg = configs[r.problem][-1].config if configs.get(r.problem) else None
        print(
            f"{r.problem:16s} {'yes' if r.accepted else 'no':8s} {times(f):>13s} {times(chosen.get(r.problem)):>8s} "
            f"{times(r.speedup_vs_eager):>8s} "
            f"{times(r.speedup_vs_compile):>9s} {r.attempts:8d}  {cfg if cfg is not None else r.reason}"
        )
        if r.accepted and r.speedup_vs_eager:
            eager.append(r.speedup_vs_eager)
        if r.accepted and r.speedup_vs_compile:
            compiled.append(r.speedup_vs_compile)
    print(f"geometric mean over accepted kernels: {geo(eager)} vs eager, {geo(compiled)} vs torch.compile")
    kept = [r.speedup_vs_eager if r.accepted and r.speedup_vs_eager else 1.0 for r in run.results]
    print(f"geometric mean over all ops (the reference kept where nothing was accepted: 1.00x): {geo(kept)} vs eager")
    print(f"{sum(r.accepted for r in run.results)}/{len(run.results)} ops accepted, {elapsed:.0f} s in all")


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "The built-in agent on every shipped example"))
