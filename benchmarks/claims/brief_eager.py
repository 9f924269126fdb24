"""Is the brief's eager the eager the verdicts compare against? For each op: the brief measured
fresh as an LLM session measures it (its own process, then the reference against itself in the
session's verifier), and then a `forge verify` of the op's candidate with the same cache; the
brief's one-process eager, its paired eager, and the verdict's eager in its own pairs, in the
judged regime, and the two ratios to the verdict's (1.00 is agreement).

Usage: python -m benchmarks.claims.brief_eager [--ops OP:CANDIDATE,...] [--repeats N] [--page PAGE.md]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.claims.agreement import DEFAULT_OPS
from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.core.problem import load_problem, reference_hash
from forge.core.settings import load_settings
from forge.core.timing_records import TimingSides
from forge.core.verdict import Verdict
from forge.verifier import VerifierService, measure_op_brief


def _verdict_eager_ms(op: str, candidate: str, cache: Path) -> tuple[str, float] | str:
    argv = [sys.executable, "-m", "forge", "verify", op, candidate, "--json"]
    env = dict(os.environ, FORGE_CACHE_DIR=str(cache))
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    try:
        v = Verdict.from_json(json.loads(done.stdout))
    except ValueError:
        return f"forge verify failed: {done.stderr.strip()[-200:]}"
    ts: TimingSides = v.timing_stats
    warm = ts.regime is not None and ts.regime.value == "warm"
    eager = ts.warm_eager_time if warm else ts.eager
    if eager is None:
        return f"no eager time ({v.reason})"
    return ("warm" if warm else "cold"), eager.median_ms


def _row(op: str, candidate: str, cache: Path) -> str:
    """One op's figures; ``cache`` keeps the machine's figures between ops, never a brief."""
    shutil.rmtree(cache / "briefs", ignore_errors=True)
    settings = load_settings(cache_dir=cache)
    path = ROOT / op
    with VerifierService(path, settings, "cpu") as service:
        brief = measure_op_brief(path, reference_hash(load_problem(path)), "cpu", settings, service)
    if brief.paired is None or brief.eager is None:
        return f"{Path(op).stem:<16} no paired figure: {'; '.join(brief.missing)}"
    got = _verdict_eager_ms(op, candidate, cache)
    if isinstance(got, str):
        return f"{Path(op).stem:<16} {got}"
    regime, verdict_ms = got
    alone, paired = brief.paired.alone_ms or 0.0, brief.paired.eager_ms
    return (
        f"{Path(op).stem:<16} {regime:<6} {alone:>9.4f} {paired:>9.4f} {verdict_ms:>9.4f} "
        f"{alone / verdict_ms:>11.2f} {paired / verdict_ms:>11.2f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default=",".join(DEFAULT_OPS), help="OP:CANDIDATE pairs, comma-separated")
    parser.add_argument("--repeats", type=int, default=1)
    add_page_option(parser)
    args = parser.parse_args()
    print("eager ms a call in the judged regime: the brief's one process, the brief's pairs (the reference")
    print("against itself), a forge verify's pairs right after; the brief's figures over the verdict's")
    print(f"{'op':<16} {'regime':<6} {'alone':>9} {'paired':>9} {'verdict':>9} {'alone/verd':>11} {'paired/verd':>11}")
    with tempfile.TemporaryDirectory(prefix="brief-eager-") as tmp:
        for _ in range(args.repeats):
            for pair in args.ops.split(","):
                op, candidate = pair.split(":")
                print(_row(op, candidate, Path(tmp)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "The brief's eager against the verdicts'"))
