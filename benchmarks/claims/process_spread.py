"""How far fresh processes read apart: each kernel of BANK reproduced in several processes.

A claim about "your process" has to cover what differs from one process to the next (where the
allocator and the kernel place its memory, which pages it gets). This script runs
``benchmarks.claims.reproduce BANK --kernel ID`` in ``--processes`` fresh processes per kernel, one
after another, and prints per kernel, in its judged regime: each process's median ratio vs eager
(and vs torch.compile), their range, the spread (largest over smallest median), and the widest
interval any one process reported around its own median. A spread well beyond one process's own
interval is what a claim measured in one process cannot see.

Usage: python -m benchmarks.claims.process_spread BANK [--kernel ID ...] [--processes N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.support.banked import active_kernels
from benchmarks.support.page import add_page_option, run_with_page
from forge.db.engine import open_for_writing


def one_process(bank: Path, kernel: int, rounds: int, out: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.claims.reproduce",
        str(bank),
        "--kernel",
        str(kernel),
        "--rounds",
        str(rounds),
    ]
    subprocess.run([*cmd, "--json", str(out)], check=True, capture_output=True)
    return dict(json.loads(out.read_text())["kernels"][0])


def describe(medians: list[float], widths: list[float]) -> str:
    low, high = min(medians), max(medians)
    shown = " ".join(f"{m:.2f}" for m in medians)
    return f"{shown:40s} range {low:.2f}-{high:.2f}x, spread {high / low:.2f}, widest own interval {max(widths):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bank", type=Path)
    ap.add_argument("--kernel", type=int, action="append", help="only these kernel ids")
    ap.add_argument("--processes", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=31)
    add_page_option(ap)
    a = ap.parse_args()
    engine = open_for_writing(a.bank)
    kernels = active_kernels(engine, a.kernel)
    print(
        f"{a.processes} fresh processes a kernel, {a.rounds} rounds each (reproduce.py, heap kept); per "
        "process: the median per-round ratio in the judged regime; own interval: its high over its low"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for k in kernels:
            runs = [one_process(a.bank, k.id, a.rounds, Path(tmp) / f"{k.id}_{i}.json") for i in range(a.processes)]
            if any("not_running" in r for r in runs):
                print(f"{k.id:>4d} {k.op:24s} NOT RUNNING")
                continue
            judged = str(runs[0]["judged"])
            for key, what in ((judged, "x eager"), (f"{judged}_compile", "x compile")):
                figures = [r[key] for r in runs if r.get(key)]
                if len(figures) != len(runs):
                    continue
                medians = [float(f[0]) for f in figures]
                widths = [float(f[2]) / float(f[1]) for f in figures]
                print(f"{k.id:>4d} {k.op:24s} {judged:4s} {what:9s} {describe(medians, widths)}", flush=True)


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "One kernel in several fresh processes"))
