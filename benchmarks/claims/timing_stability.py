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
``--trials N`` times N calls a side (default: ``confirm_trials``, 60, as a session's confirmation).

``--control``: after each verification the op's reference is verified against itself (the null
control a session measures before banking a finalist), and "w/ null" counts the repeats that
clear its bar (``acceptance.null_bar``); "null med" is the range of the null's medians. Every
verification of an op runs in one ``VerifierService``, as a session's do.

Usage: python -m benchmarks.claims.timing_stability [--repeats N] [--ops rmsnorm,...] [--null] [--load] [--trials N]
       [--control]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.core.acceptance import beats_eager
from forge.core.settings import load_settings
from forge.core.verdict import Verdict
from forge.harness.sessions.null_control import judged_against
from forge.verifier import Job, VerifierService

PAIRS = {
    "scale_bias_gelu": "scale_bias_gelu_cpp",
    "softmax": "softmax_torch",
    "layernorm": "layernorm_cpp",
    "rmsnorm": "rmsnorm_cpp",
    "row_sum": "rowsum_torch",
    "linear_gelu": "linear_gelu_cpp",
}
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


@dataclass
class Tally:
    """One op's repeats."""

    speedups: list[float] = field(default_factory=list)
    intervals: list[tuple[float, float]] = field(default_factory=list)
    nulls: list[float] = field(default_factory=list)  # --control: the null control's medians
    busy: int = 0
    retried: int = 0
    accepted: int = 0
    accepted_controlled: int = 0
    secs: list[float] = field(default_factory=list)
    pairs: int = 0

    def add(self, v: Verdict, null: Verdict | None) -> None:
        paired, load = v.timing_stats.headline_pairs()[0], v.timing_stats.contention
        assert paired is not None
        self.pairs = paired.pairs
        self.speedups.append(paired.median)
        self.intervals.append((paired.low, paired.high))
        self.busy += bool(load and load.busy)
        self.retried += load.retried if load else 0
        self.accepted += beats_eager(v)[0]
        if null is not None:  # a null that sets no bar banks nothing
            judged, ok, _, _ = judged_against(v, null)
            self.accepted_controlled += ok
            if judged.timing_stats.null_eager is not None:
                self.nulls.append(judged.timing_stats.null_eager.median)

    def row(self, op: str, repeats: int, control: bool) -> str:
        sp = self.speedups
        spread = f"{min(sp):.2f}/{statistics.median(sp):.2f}/{max(sp):.2f}"
        lo, hi = min(i[0] for i in self.intervals), max(i[1] for i in self.intervals)
        out = (
            f"{op:16s} {self.pairs:5d} {spread:>20s} {f'{lo:.2f}-{hi:.2f}':>14s} {self.busy:>5d} {self.retried:>7d} "
            f"{self.accepted:>4d}/{repeats:<3d}"
        )
        if control:
            nulls = f"{min(self.nulls):.2f}-{max(self.nulls):.2f}" if self.nulls else "-"
            out += f" {nulls:>11s} {self.accepted_controlled:>4d}/{repeats:<3d}"
        return out + f" {statistics.median(self.secs):8.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ops", default=None, help="comma-separated (default: every op with a candidate; --null: all)")
    ap.add_argument("--null", action="store_true", help="time each op's reference against itself")
    ap.add_argument("--load", action="store_true", help="run a competing CPU-heavy job during each verification")
    ap.add_argument("--trials", type=int, default=None, help="timed calls a side (default: the budget's)")
    ap.add_argument("--control", action="store_true", help="judge each repeat with a null control, as a session does")
    add_page_option(ap)
    a = ap.parse_args()
    # the isolated verification's timing is what this measures: no user loop beside it
    settings = load_settings(compile_baseline=False, user_loop=False)
    trials = a.trials or settings.confirm_trials
    print("candidates: " + ("each op's own reference (noise only)" if a.null else "examples/candidates"))
    print("machine: " + ("a competing CPU-heavy job runs during every verification" if a.load else "quiet"))
    head = f"{'op':16s} {'pairs':>5s} {'x eager min/med/max':>20s} {'widest 95% CI':>14s} {'busy':>5s} "
    head += f"{'retried':>7s} {'accepted':>8s}"
    head += f" {'null med':>11s} {'w/ null':>8s}" if a.control else ""
    print(head + f" {'s/verify':>8s}")
    everything = sorted(p.stem for p in (ROOT / "examples/ops").glob("*.py")) if a.null else list(PAIRS)
    for op in a.ops.split(",") if a.ops else everything:
        source = "" if a.null else (ROOT / "examples/candidates" / f"{PAIRS[op]}.py").read_text()
        tally = Tally()
        # A session's service: the reference worker kept from one verification to the next.
        with VerifierService(ROOT / "examples/ops" / f"{op}.py", settings, "cpu") as service:
            for _ in range(a.repeats):
                t0 = time.monotonic()
                with competing_load(a.load):
                    if a.null:  # the reference as its own candidate: it runs the reference by design
                        v = service.verify_null(trials, settings.timeout)
                    else:
                        v = service.verify_alone(Job("candidate", source), trials, settings.timeout)
                    null = service.verify_null(trials, settings.timeout) if a.control else None
                tally.secs.append(time.monotonic() - t0)
                if not v.passed or v.timing_stats.headline_pairs()[0] is None:
                    print(f"{op:16s} {v.status}: {v.reason}")
                    break
                tally.add(v, null)
            else:
                print(tally.row(op, a.repeats, a.control), flush=True)


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Timing stability: the same verification repeated"))
