"""What the sandbox costs: `forge verify` on the shipped examples, and one `forge optimize`
session, sandboxed and with `--unsandboxed`, taking turns (so drift hits both alike).

Prints per case the median seconds of each (a fresh CLI process each time, warm caches: a first
untimed run of each fills them) and their ratio, then the session's wall time both ways (its
second run each way: the first fills the compile caches).

Usage: python -m benchmarks.costs.sandbox_cost [--runs N] [--rounds N] [--page docs/benchmarks/sandbox-cost.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT

CASES = [
    ("examples/ops/rmsnorm.py", "examples/candidates/rmsnorm_cpp.py"),
    ("examples/ops/layernorm.py", "examples/candidates/layernorm_cpp.py"),
    ("examples/ops/softmax.py", "examples/candidates/softmax_torch.py"),
]
SESSION_OP = "examples/ops/softmax.py"


def _seconds(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "forge", *args], cwd=ROOT, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(
            f"forge {' '.join(args)} failed ({done.returncode}): {done.stdout[-600:]} {done.stderr[-600:]}"
        )
    return took


def _both(args: list[str], env: dict[str, str], runs: int) -> tuple[list[float], list[float]]:
    """Seconds of ``args`` sandboxed and unsandboxed, ``runs`` of each taking turns (after one
    untimed run of each)."""
    boxed: list[float] = []
    free: list[float] = []
    for k in range(runs + 1):
        b, f = _seconds(args, env), _seconds([*args, "--unsandboxed"], env)
        if k:
            boxed.append(b)
            free.append(f)
    return boxed, free


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the optimize session")
    add_page_option(ap)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "FORGE_CACHE_DIR": str(Path(tmp) / "cache"), "FORGE_BANK": str(Path(tmp) / "bank.db")}
        print(f"`forge verify OP CANDIDATE --no-compile-baseline`, {a.runs} runs each way, taking turns\n")
        print("| op | candidate | sandboxed s (median, range) | unsandboxed s | ratio |")
        print("|---|---|---|---|---|")
        for op, cand in CASES:
            boxed, free = _both(["verify", op, cand, "--no-compile-baseline", "--json"], env, a.runs)
            ratio = statistics.median(boxed) / statistics.median(free)
            print(
                f"| {Path(op).stem} | {Path(cand).name} | {statistics.median(boxed):.2f} ({min(boxed):.2f}-"
                f"{max(boxed):.2f}) | {statistics.median(free):.2f} ({min(free):.2f}-{max(free):.2f}) | {ratio:.2f} |"
            )
        args = ["optimize", SESSION_OP, "--rounds", str(a.rounds), "--no-compile-baseline", "--json"]
        took = {}
        for k in range(2):  # the first of each fills the compile caches both share: untimed
            for way, extra in (("sandboxed", []), ("unsandboxed", ["--unsandboxed"])):
                took[way] = _seconds([*args, *extra, "--bank", str(Path(tmp) / f"{way}{k}.db")], env)
        print(
            f"\n`forge {' '.join(args[:-1])}` (built-in agent, a fresh bank each run), after one untimed run each way:"
        )
        print(
            f"sandboxed {took['sandboxed']:.1f} s, unsandboxed {took['unsandboxed']:.1f} s, ratio "
            f"{took['sandboxed'] / took['unsandboxed']:.2f}"
        )


if __name__ == "__main__":
    run_with_page(main, "The sandbox's cost")
