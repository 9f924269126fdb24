"""How stable forge's timing verdicts are: verify each shipped example candidate several times.

For each op prints: timed trials per side, the speedup vs eager over the repeats (min / median /
max), the candidate's and eager's upper quartile relative to their median (spread inside one
verification), and in how many repeats the candidate beat eager beyond the noise (the acceptance
rule of `forge optimize`). A harness whose numbers are honest gives the same answer every time.

``--null``: the candidate is the op's own reference (``class ModelNew(Model): pass``), so every
difference measured is noise. The speedup spread is this machine's noise floor, and "accepted"
must stay at 0: a rule that accepts the reference as faster than itself banks noise.
``--trials N`` times N calls a side (the confirmation stage times 60).

Usage: python benchmarks/timing_stability.py [--repeats N] [--ops rmsnorm,softmax,...] [--null] [--trials N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from forge.core.acceptance import beats_eager
from forge.core.settings import load_settings
from forge.verifier import verify

ROOT = Path(__file__).resolve().parents[1]
PAIRS = {
    "scale_bias_gelu": "scale_bias_gelu_cpp",
    "softmax": "softmax_torch",
    "layernorm": "layernorm_cpp",
    "rmsnorm": "rmsnorm_cpp",
    "row_sum": "rowsum_torch",
    "linear_gelu": "linear_gelu_cpp",
}
NULL_CANDIDATE = "from forge_reference import Model\n\n\nclass ModelNew(Model):\n    pass\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ops", default=None, help="comma-separated (default: every op with a candidate; --null: all)")
    ap.add_argument("--null", action="store_true", help="time each op's reference against itself")
    ap.add_argument("--trials", type=int, default=None, help="timed calls a side (default: the budget's)")
    a = ap.parse_args()
    settings = load_settings(compile_baseline=False, timing_trials=a.trials)
    if a.null:
        null = Path(tempfile.mkdtemp(prefix="forge-null-")) / "null_candidate.py"
        null.write_text(NULL_CANDIDATE)
    print("candidates: " + ("each op's own reference (noise only)" if a.null else "examples/candidates"))
    print(
        f"{'op':16s} {'trials':>6s} {'x eager min/med/max':>20s} {'cand q3/med':>11s} {'eager q3/med':>12s} "
        f"{'accepted':>8s} {'s/verify':>8s}"
    )
    everything = sorted(p.stem for p in (ROOT / "examples/ops").glob("*.py")) if a.null else list(PAIRS)
    for op in a.ops.split(",") if a.ops else everything:
        cand = null if a.null else ROOT / "examples/candidates" / f"{PAIRS[op]}.py"
        speedups, cand_tail, eager_tail, accepted, secs, trials = [], [], [], 0, [], 0
        for _ in range(a.repeats):
            t0 = time.monotonic()
            v = verify(ROOT / "examples/ops" / f"{op}.py", cand, settings)
            secs.append(time.monotonic() - t0)
            cs, es = v.timing_stats.candidate, v.timing_stats.eager
            if not v.passed or cs is None or es is None or v.speedup_vs_eager is None:
                print(f"{op:16s} {v.status}: {v.reason}")
                break
            trials = cs.trials
            speedups.append(v.speedup_vs_eager)
            cand_tail.append(cs.q3_ms / cs.median_ms)
            eager_tail.append(es.q3_ms / es.median_ms)
            accepted += beats_eager(v)[0]
        else:
            spread = f"{min(speedups):.2f}/{statistics.median(speedups):.2f}/{max(speedups):.2f}"
            print(
                f"{op:16s} {trials:6d} {spread:>20s} {max(cand_tail):11.2f} {max(eager_tail):12.2f} "
                f"{accepted:>4d}/{a.repeats:<3d} {statistics.median(secs):8.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
