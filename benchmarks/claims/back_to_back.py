"""What the warm regime's untimed call before each timed call changes: an op's reference timed
against a copy of itself (its twin) in the plain loop, warm, with and without the call before,
with two sides (eager, twin) and with torch.compile in the rotation as the user loop has it.

Every difference between eager and its twin is noise or bias, so the per-round ratio's median
should be 1.00x and its 95% interval narrow. Prints, per variant and repeat, that median and
interval and each side's median time. Run it in the workers' allocator and spin environment
(``--workers-env``, the default) or the process's own.

Usage: python -m benchmarks.claims.back_to_back [OP.py] [--rounds N] [--repeats N] [--own-env] [--page PAGE.md]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.verifier.machine.memory import MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES

WORKERS_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_BYTES),
    "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD_BYTES),
    "GOMP_SPINCOUNT": "10000",
}


def measure(op: Path, rounds: int, repeats: int) -> None:
    """The variants, ``repeats`` times each, in this process."""
    import torch

    from forge.core.pairing import paired_ratio
    from forge.core.problem import load_problem
    from forge.verifier.worker.call_form import invoke
    from forge.verifier.worker.timing.plain_loop import Side, time_sides

    problem = load_problem(op)
    torch.manual_seed(0)
    reference = problem.build_model(problem.init_inputs()).eval()
    twin = copy.deepcopy(reference)
    compiled = torch.compile(reference)
    with torch.no_grad():
        invoke(compiled, problem.inputs())

    def side(m: Callable[..., Any]) -> Side:
        return lambda x: invoke(m, x)

    print("| variant | sides | eager / twin median (95%) | eager ms | twin ms | compile ms |")
    print("|---|---|---|---|---|---|")
    two = {"eager": side(reference), "twin": side(twin)}
    for _ in range(repeats):
        for back in (False, True):
            for named in (two, {**two, "compile": side(compiled)}):
                t = time_sides(named, problem.inputs, rounds, False, 0, back_to_back=back)
                r = paired_ratio(t["eager"], t["twin"])  # eager's time over its twin's, round by round
                assert r is not None
                ms = {k: f"{statistics.median(v) / 1e6:.3f}" for k, v in t.items()}
                variant = "back to back" if back else "values written only"
                print(
                    f"| {variant} | {len(named)} | {r.median:.2f}x ({r.low:.2f}-{r.high:.2f}) "
                    f"| {ms['eager']} | {ms['twin']} | {ms.get('compile', '-')} |",
                    flush=True,
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("op", nargs="?", default=str(ROOT / "tests" / "ops" / "quick_rmsnorm.py"))
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--own-env", action="store_true", help="this process's allocator and spin, not the workers'")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_page_option(parser)
    args = parser.parse_args(argv)
    if args.child:
        measure(Path(args.op), args.rounds, args.repeats)
        return 0
    env = os.environ if args.own_env else {**os.environ, **WORKERS_ENV}
    print(f"op: {args.op}; {args.rounds} rounds a side; environment: {'own' if args.own_env else 'workers'}")
    cmd = [sys.executable, "-m", "benchmarks.claims.back_to_back", args.op, "--child"]
    cmd += ["--rounds", str(args.rounds), "--repeats", str(args.repeats)]
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)  # the env applies at start
    print(done.stdout.rstrip())
    if done.returncode:
        print(done.stderr[-2000:])
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "The warm regime's call before: back to back or not"))
