"""What a verification costs, in seconds and in memory.

Time: one small op (tanh(x) * 2 + 1 on 64x256), verified N times in a row the way a session does it
(``VerifierService``: workers forked from a template, the reference worker kept between
verifications), against the same N verifications each started from scratch (``verify`` with
templates off: two fresh interpreters and a new torch.compile baseline every time). Prints the first
and the median of the rest for each; the torch.compile baseline is on, as by default.

Memory: each process's peak resident size (the kernel's high-water mark) for the shipped examples
and for one op with ~1 GiB of inputs (relu, then a sum over the last
dimension), against the bound max(1 GiB, 8x a call's inputs and outputs).

Usage: python -m benchmarks.costs.verify_cost [--runs N] [--big-gib G] [--skip-time] [--skip-memory]
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

from benchmarks.kernels.verify_examples import PAIRS as EXAMPLES  # the shipped examples and their candidates
from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.core.settings import load_settings
from forge.verifier import Job, VerifierService, verify

SMALL_OP = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2 + 1


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
"""
SMALL_CANDIDATE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.tanh(x).mul_(2).add_(1)
"""
BIG_OP = """
import torch
import torch.nn as nn

rows = {rows}
cols = 16384


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x).sum(dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
"""
BIG_CANDIDATE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0).sum(dim=-1)
"""


def _spread(xs: list[float]) -> str:
    rest = xs[1:] or xs
    med = statistics.median(rest)
    return f"first {xs[0]:5.2f} s; rest median {med:5.2f} s (min {min(rest):.2f}, max {max(rest):.2f})"


def time_small(runs: int, work: Path) -> None:
    op, cand = work / "small_op.py", work / "small_candidate.py"
    op.write_text(SMALL_OP)
    cand.write_text(SMALL_CANDIDATE)
    settings = load_settings()
    print(f"small op, {runs} verifications each, torch.compile baseline on, {os.cpu_count()} cores")
    os.environ["FORGE_WORKER_TEMPLATE"] = "0"
    fresh = []
    for _ in range(runs):
        t0 = time.perf_counter()
        v = verify(op, cand, settings)
        fresh.append(time.perf_counter() - t0)
        assert v.passed, v.reason
    print(f"  every worker exec'd, reference started each time: {_spread(fresh)}")
    os.environ.pop("FORGE_WORKER_TEMPLATE")
    kept = []
    with VerifierService(op, settings, "cpu") as service:
        for i in range(runs):
            t0 = time.perf_counter()
            (v,) = service.verify([Job(f"c{i}", SMALL_CANDIDATE)])
            kept.append(time.perf_counter() - t0)
            assert v.passed, v.reason
    print(f"  forked from a template, reference kept (a session): {_spread(kept)}")


def _memory_row(name: str, op: Path, cand: Path) -> None:
    t0 = time.perf_counter()
    v = verify(op, cand, load_settings(compile_baseline=False))
    m = v.memory
    if m is None or m.bound_mib is None:
        print(f"  {name:22s} {v.status}: no memory figures ({v.reason})")
        return
    ok = "within" if m.within_limit else "OVER"
    print(
        f"  {name:22s} {v.status!s:8s} candidate {m.candidate_mib:6d}  reference {m.reference_mib:6d}  "
        f"forge {m.forge_mib:6d}  bound {m.bound_mib:6d}  candidate's limit {m.limit_mib or m.bound_mib:6d} MiB  "
        f"{ok}  ({time.perf_counter() - t0:.0f} s)"
    )


def _in_fresh_process(name: str, op: Path, cand: Path) -> None:
    """One row, verified by a process of its own: its "forge" peak is that verification's alone."""
    row = subprocess.run(
        [sys.executable, "-m", "benchmarks.costs.verify_cost", "--one", name, str(op), str(cand)],
        capture_output=True,
        text=True,
    )
    if row.returncode != 0:
        raise SystemExit(f"{name}: the measuring process failed:\n{row.stderr[-2000:]}")
    print(row.stdout, end="")


def memory_peaks(big_gib: float, work: Path) -> None:
    print("peak resident size per process (MiB), one verification each, in a fresh process each")
    for op, cand in EXAMPLES:
        _in_fresh_process(op, ROOT / "examples/ops" / f"{op}.py", ROOT / "examples/candidates" / f"{cand}.py")
    if big_gib > 0:
        rows = max(1, int(big_gib * (1 << 30) / (16384 * 4)))
        op, cand = work / "big_op.py", work / "big_candidate.py"
        op.write_text(BIG_OP.format(rows=rows))
        cand.write_text(BIG_CANDIDATE)
        _in_fresh_process(f"relu+sum {rows}x16384 ({rows * 16384 * 4 / 2**30:.2f} GiB in)", op, cand)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--big-gib", type=float, default=1.0, help="input size of the large op (0: skip it)")
    ap.add_argument("--skip-time", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--one", nargs=3, metavar=("NAME", "OP", "CANDIDATE"), help=argparse.SUPPRESS)
    add_page_option(ap)
    a = ap.parse_args()
    if a.one:
        _memory_row(a.one[0], Path(a.one[1]), Path(a.one[2]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        if not a.skip_time:
            time_small(a.runs, Path(tmp))
        if not a.skip_memory:
            memory_peaks(a.big_gib, Path(tmp))


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "What a verification costs: time and memory"))
