"""Check a bank's claims the way a user would: a plain loop in one process, their own clock.

For every active kernel in BANK: the op's reference, the kernel as ``bank.load`` returns it, and
``torch.compile`` of the reference are built from the bank's own sources and timed with
``time.perf_counter`` around single calls, the three sides interleaved call by call (so load that
comes and goes lands on all three), in two regimes:

* warm: back-to-back calls on the same inputs, as in a model whose activations are still in
  cache;
* cold: the last-level cache flushed (a buffer twice its size written) before each call, on
  inputs drawn for that call, as forge's verifier times.

It prints forge's claim (the banked speedups vs eager and vs torch.compile, with the interval the
verifier measured, and the regime it was judged in) beside the median of the per-round ratios in
each regime and their 95% interval, and says whether the claim falls within that interval widened
by this machine's noise (10%, "How much is noise" in the README); the judged regime is bracketed.

Usage: python benchmarks/reproduce.py BANK [--rounds N] [--kernel ID ...] [--no-compile]
Run it from the directory the ops were verified in when their Model comes from user code.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import forge.kernelbank as kb
from forge.core.importing import import_file
from forge.db.engine import open_for_writing
from forge.db.kernels import kernel_detail, list_kernels
from forge.verifier.machine import cpu_flush_bytes
from forge.verifier.pairing import paired_ratio

NOISE = 0.10  # this VM's measured noise between identical runs (README, "How much is noise")


@dataclass
class Regime:
    eager: float  # median per-round ratio: eager time / kernel time
    eager_low: float
    eager_high: float
    compiled: float | None


def _ratio_interval(base: list[int], kernel: list[int]) -> tuple[float, float, float]:
    r = paired_ratio(base, kernel)
    assert r is not None
    return r.median, r.low, r.high


def time_sides(sides: dict[str, Callable[[list[torch.Tensor]], Any]], draw: Callable[[], list[torch.Tensor]],
               rounds: int, cold: bool) -> dict[str, list[int]]:  # fmt: skip
    """Per-call nanoseconds of each side, interleaved call by call; the order rotates per round."""
    flush = torch.empty(cpu_flush_bytes() // 4) if cold else None
    fixed = draw()
    names = list(sides)
    out: dict[str, list[int]] = {n: [] for n in names}
    with torch.no_grad():
        for name in names:  # warm-up (compiles torch.compile's graph)
            for _ in range(3):
                sides[name](fixed)
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                inputs = draw() if cold else fixed
                if flush is not None:
                    flush.fill_(r)
                t0 = time.perf_counter_ns()
                sides[name](inputs)
                out[name].append(time.perf_counter_ns() - t0)
    return out


def measure(op_module: Any, bank: kb.KernelBank, op: str, rounds: int, compile_too: bool) -> dict[str, Regime]:
    init = op_module.get_init_inputs()
    torch.manual_seed(0)
    reference = op_module.Model(*init).eval()
    kernel = bank.load(op, *init).eval()
    kernel.load_state_dict(reference.state_dict())
    sides: dict[str, Callable[[list[torch.Tensor]], Any]] = {
        "eager": lambda x: reference(*x),
        "kernel": lambda x: kernel(*x),
    }
    if compile_too:
        compiled = torch.compile(reference)
        sides["compile"] = lambda x: compiled(*x)
    regimes = {}
    for name, cold in (("warm", False), ("cold", True)):
        t = time_sides(sides, op_module.get_inputs, rounds, cold)
        med, low, high = _ratio_interval(t["eager"], t["kernel"])
        comp = _ratio_interval(t["compile"], t["kernel"])[0] if "compile" in t else None
        regimes[name] = Regime(med, low, high, comp)
    return regimes


def within(claim: float | None, r: Regime) -> str:
    if claim is None:
        return "-"
    return "yes" if r.eager_low * (1 - NOISE) <= claim <= r.eager_high * (1 + NOISE) else "NO"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bank", type=Path)
    ap.add_argument("--rounds", type=int, default=31, help="calls a side in each regime")
    ap.add_argument("--kernel", type=int, action="append", help="only these kernel ids")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    a = ap.parse_args()
    sys.path.insert(0, str(Path.cwd()))
    engine = open_for_writing(a.bank)
    bank = kb.open(a.bank)
    print(f"{torch.get_num_threads()} threads; warm = back-to-back calls on the same inputs, cold = LLC flushed, "
          "fresh inputs; ratios are eager (or torch.compile) time over the kernel's, per round")  # fmt: skip
    print(f"{'kernel':>6s} {'op':18s} {'claimed x eager (CI)':>22s} {'x compile':>9s} | "
          f"{'warm x eager (CI)':>20s} {'x compile':>9s} | {'cold x eager (CI)':>20s} {'x compile':>9s} | "
          "judged | claim within: warm cold")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for summary in list_kernels(engine):
            if (a.kernel and summary.id not in a.kernel) or str(summary.status) != "active":
                continue
            k = kernel_detail(engine, summary.id)
            op_path = Path(tmp) / f"op_{k.summary.id}.py"
            op_path.write_text(k.op_source)
            op_module = import_file(f"reproduce_op_{k.summary.id}", op_path)
            regimes = measure(op_module, bank, k.op_name, a.rounds, not a.no_compile)
            v = k.evidence
            paired = v.timing_stats.paired_eager
            claim = f"{v.speedup_vs_eager or 0:.2f}x" + (f" ({paired.low:.2f}-{paired.high:.2f})" if paired else "")
            cells = []
            for name in ("warm", "cold"):
                r = regimes[name]
                comp = f"{r.compiled:.2f}x" if r.compiled else "-"
                cells.append(f"{f'{r.eager:.2f}x ({r.eager_low:.2f}-{r.eager_high:.2f})':>20s} {comp:>9s}")
            claimed_compile = f"{v.speedup_vs_compile:.2f}x" if v.speedup_vs_compile else "-"
            judged = str(v.timing_stats.regime or "cold")  # verdicts from before the regimes were timed cold
            marks = {name: within(v.speedup_vs_eager, regimes[name]) for name in ("warm", "cold")}
            marks[judged] = f"[{marks[judged]}]"  # the regime the claim was judged in
            print(
                f"{k.summary.id:>6d} {k.op_name:18s} {claim:>22s} {claimed_compile:>9s} | {cells[0]} | {cells[1]} | "
                f"{judged:>6s} | {marks['warm']:>5s} {marks['cold']:>5s}",
                flush=True,
            )


if __name__ == "__main__":
    main()
