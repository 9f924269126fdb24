"""How stable forge's timing verdicts are: verify each shipped example candidate several times.

For each op prints: timed calls per side, the speedup vs eager over the repeats (min / median /
max of the paired median), the widest 95% interval of the per-pair ratio, how often the machine
was judged busy (and how many batches were timed again), and in how many repeats the candidate
beat eager beyond the noise (the acceptance rule of `forge optimize`). A harness whose numbers are
honest gives the same answer every time.

``--null``: the candidate is the op's own reference (``class ModelNew(Model): pass``), so every
difference measured is noise. "accepted" must stay at 0: a rule that accepts the reference as
faster than itself banks noise.

``--load``: a competing CPU-heavy job runs during every verification: one process spinning on a
core and one that spins in 50 ms bursts every 150 ms (the pattern that made forge bank 13-16x for
a 2x RMSNorm). Under load a verification must either keep its quiet-machine answer or say the
machine was busy (and then acceptance refuses it); it must never accept the null candidate.
``--trials N`` times N calls a side (the confirmation stage times 60).

Usage: python benchmarks/timing_stability.py [--repeats N] [--ops rmsnorm,...] [--null] [--load] [--trials N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
SPIN = "while True:\n    pass\n"
BURSTS = """import time
while True:
    t = time.monotonic()
    while time.monotonic() - t < 0.05:
        pass
    time.sleep(0.1)
"""


@contextmanager
def competing_load(on: bool) -> Iterator[None]:
    """A CPU-heavy job beside the verification (nothing when ``on`` is false)."""
    procs = [subprocess.Popen([sys.executable, "-c", code]) for code in (SPIN, BURSTS)] if on else []
    try:
        time.sleep(0.5 if on else 0)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ops", default=None, help="comma-separated (default: every op with a candidate; --null: all)")
    ap.add_argument("--null", action="store_true", help="time each op's reference against itself")
    ap.add_argument("--load", action="store_true", help="run a competing CPU-heavy job during each verification")
    ap.add_argument("--trials", type=int, default=None, help="timed calls a side (default: the budget's)")
    a = ap.parse_args()
    settings = load_settings(compile_baseline=False, timing_trials=a.trials)
    if a.null:
        null = Path(tempfile.mkdtemp(prefix="forge-null-")) / "null_candidate.py"
        null.write_text(NULL_CANDIDATE)
    print("candidates: " + ("each op's own reference (noise only)" if a.null else "examples/candidates"))
    print("machine: " + ("a competing CPU-heavy job runs during every verification" if a.load else "quiet"))
    print(
        f"{'op':16s} {'pairs':>5s} {'x eager min/med/max':>20s} {'widest 95% CI':>14s} {'busy':>5s} "
        f"{'retried':>7s} {'accepted':>8s} {'s/verify':>8s}"
    )
    everything = sorted(p.stem for p in (ROOT / "examples/ops").glob("*.py")) if a.null else list(PAIRS)
    for op in a.ops.split(",") if a.ops else everything:
        cand = null if a.null else ROOT / "examples/candidates" / f"{PAIRS[op]}.py"
        speedups, intervals, busy, retried, accepted, secs, pairs = [], [], 0, 0, 0, [], 0
        for _ in range(a.repeats):
            t0 = time.monotonic()
            with competing_load(a.load):
                v = verify(ROOT / "examples/ops" / f"{op}.py", cand, settings)
            secs.append(time.monotonic() - t0)
            paired, load = v.timing_stats.paired_eager, v.timing_stats.contention
            if not v.passed or paired is None:
                print(f"{op:16s} {v.status}: {v.reason}")
                break
            pairs = paired.pairs
            speedups.append(paired.median)
            intervals.append((paired.low, paired.high))
            busy += bool(load and load.busy)
            retried += load.retried if load else 0
            accepted += beats_eager(v)[0]
        else:
            spread = f"{min(speedups):.2f}/{statistics.median(speedups):.2f}/{max(speedups):.2f}"
            lo, hi = min(i[0] for i in intervals), max(i[1] for i in intervals)
            print(
                f"{op:16s} {pairs:5d} {spread:>20s} {f'{lo:.2f}-{hi:.2f}':>14s} {busy:>5d} {retried:>7d} "
                f"{accepted:>4d}/{a.repeats:<3d} {statistics.median(secs):8.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
