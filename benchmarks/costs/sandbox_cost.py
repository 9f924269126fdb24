"""What the sandbox costs: `forge verify` on the shipped examples, and one `forge optimize`
session, sandboxed and with `--unsandboxed`, taking turns (so drift hits both alike).

Prints per case the median seconds of each (a fresh CLI process each time, warm caches: a first
untimed run of each fills them) and their ratio, then the session's median wall time both ways
(after an untimed run each way, which fills the compile caches; which way goes first alternates,
since the first of a pair read 10-15% slower on the 2-core VM whichever way it was).

Usage: python -m benchmarks.costs.sandbox_cost [--runs N] [--rounds N] [--session-runs N]
       [--page docs/benchmarks/sandbox-cost.md]
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
SESSION_OP = "examples/ops/rmsnorm.py"  # one whose session banks a kernel (confirmation included) both ways


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
    ap.add_argument("--session-runs", type=int, default=2, help="timed sessions each way")
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
        took: dict[str, list[float]] = {"sandboxed": [], "unsandboxed": []}
        ways = [("sandboxed", []), ("unsandboxed", ["--unsandboxed"])]
        for k in range(a.session_runs + 1):  # the first of each fills the compile caches both share: untimed
            for way, extra in ways if k % 2 == 0 else ways[::-1]:  # which goes first alternates
                s = _seconds([*args, *extra, "--bank", str(Path(tmp) / f"{way}{k}.db")], env)
                if k:
                    took[way].append(s)
        boxed, free = statistics.median(took["sandboxed"]), statistics.median(took["unsandboxed"])
        print(
            f"\n`forge {' '.join(args[:-1])}` (built-in agent, a fresh bank each run), {a.session_runs} runs each "
            "way after one untimed run each, which goes first alternating:"
        )
        print(
            f"sandboxed {boxed:.1f} s ({', '.join(f'{t:.1f}' for t in took['sandboxed'])}), unsandboxed {free:.1f} s "
            f"({', '.join(f'{t:.1f}' for t in took['unsandboxed'])}), ratio of the medians {boxed / free:.2f}"
        )


if __name__ == "__main__":
    run_with_page(main, "The sandbox's cost")
