"""What the built-in agent does with the ops in a directory: whether it takes each on, and (with
``--optimize``) whether a kernel verified, whether one was accepted as faster than eager beyond the
noise, and the speedups.

The first word of each op's docstring, before a colon, is its category ("example" when there is
none; benchmarks/op_catalog/ has
one op per category of the ops users bring: activations, norms, reductions, scans, pooling,
losses, softmax over a middle dimension, convolutions and batched matmuls with epilogues).

Usage: python -m benchmarks.kernels.coverage DIR [DIR ...] [--optimize] [--rounds 4] [--every N] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.agents import CoderContext
from forge.agents.builtin import BuiltinCoder
from forge.core.problem import read_problem_source
from forge.core.statuses import AttemptRole, AttemptStatus
from forge.db import load_session, open_bank


@dataclass
class Row:
    op: str
    category: str
    taken: bool
    why: str = ""
    verified: bool | None = None
    accepted: bool | None = None
    eager: float | None = None
    compiled: float | None = None


def _category(path: Path) -> str:
    source = read_problem_source(path).source
    first = source.split('"""')[1].strip().splitlines()[0] if source.startswith('"""') else ""
    head = first.split(":")[0] if ":" in first else ""
    return head if head and " " not in head else "example"


def takes_on(path: Path) -> tuple[bool, str]:
    spec = read_problem_source(path)
    (proposal,) = BuiltinCoder(path, "cpp").propose(CoderContext(spec.name, spec.source, "cpu", "cpp"))
    return proposal.source is not None, (proposal.error or "").split(" (", 1)[-1].split("); use --model")[0]


def optimize(path: Path, rounds: int, bank: Path, timeout: float) -> tuple[bool, bool, float | None, float | None, str]:
    """(a kernel verified, one was accepted, x eager, x compile, the session's status and measured
    reason, or what went wrong)."""
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "forge",
                "optimize",
                str(path),
                "--rounds",
                str(rounds),
                "--bank",
                str(bank),
                "--json",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "FORGE_DEVICE": "cpu"},
            timeout=timeout,
        )
        (result,) = json.loads(done.stdout)["problems"]
    except subprocess.TimeoutExpired:
        return False, False, None, None, f"timed out after {timeout:.0f} s"
    except (json.JSONDecodeError, ValueError, KeyError):
        return False, False, None, None, f"forge exited {done.returncode}: {done.stderr.strip()[-150:]}"
    passed = 0
    if result["session_id"] is not None:
        with open_bank(bank) as engine:
            attempts = load_session(engine, result["session_id"]).attempts
        passed = sum(a.role is AttemptRole.CODER and a.status is AttemptStatus.PASSED for a in attempts)
    status = str(result.get("status"))
    # A no_gain session's reason is measured (the best kernel's speedup and its interval, eager's
    # share of the roofline): the table keeps those figures, not the fixed words before them.
    measured = str(result.get("reason") or "").split("beyond the measured noise: ", 1)[-1]
    why = f"{status}: {measured}" if measured else status
    return passed > 0, bool(result["accepted"]), result["speedup_vs_eager"], result["speedup_vs_compile"], why


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--optimize", action="store_true", help="run forge optimize on each op taken on")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--every", type=int, default=1, help="take every Nth op (a sample of a large directory)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per op's forge optimize")
    add_page_option(ap)
    a = ap.parse_args()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = sorted(p for d in a.dirs for p in d.glob("*.py") if not p.name.startswith("_"))
        for path in paths[:: a.every]:
            try:
                taken, why = takes_on(path)
            except Exception as exc:  # a fetched benchmark's op that does not even load
                taken, why = False, f"{type(exc).__name__}: {str(exc)[:80]}"
            row = Row(path.stem, _category(path), taken, "" if taken else why)
            if taken and a.optimize:
                found = optimize(path, a.rounds, Path(tmp) / "bank.db", a.timeout)
                row.verified, row.accepted, row.eager, row.compiled, status = found
                row.why = "" if row.accepted else status
            rows.append(row)
            print(
                f"{row.op:28s} {row.category:11s} {'taken' if taken else 'no':6s} "
                f"{'' if row.verified is None else ('verified' if row.verified else 'none verified'):14s} "
                f"{'' if row.accepted is None else ('accepted' if row.accepted else 'not accepted'):13s} "
                f"{'' if row.eager is None else f'{row.eager:.2f}x eager':12s} "
                f"{'' if row.compiled is None else f'{row.compiled:.2f}x compile':14s} {row.why[:160]}",
                flush=True,
            )
    categories = sorted({r.category for r in rows})
    covered = [c for c in categories if any(r.taken for r in rows if r.category == c)]
    print(
        f"\n{sum(r.taken for r in rows)}/{len(rows)} ops taken on; categories with at least one op taken on: "
        f"{len(covered)}/{len(categories)} ({', '.join(covered) or 'none'})"
    )
    for c in categories:
        of = [r for r in rows if r.category == c]
        print(f"  {c:11s} {sum(r.taken for r in of)}/{len(of)}")
    if a.optimize:
        verified = [r for r in rows if r.verified]
        accepted = [r for r in rows if r.accepted]
        g = _geomean([r.compiled for r in accepted if r.compiled])
        print(
            f"verified {len(verified)}/{len(rows)}, accepted {len(accepted)}/{len(verified) or 1} of the verified; "
            f"geometric mean vs torch.compile on the accepted: {'—' if g is None else f'{g:.2f}x'}"
        )


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "The built-in agent on ops it was not tuned for"))
