"""Does the verifier's figure agree with a user's loop? Each op's candidate verified as a session
confirms a finalist (``forge verify --null-control --json``: paired timing in two isolated workers,
then the plain loop in fresh processes, then the reference against itself), and the two figures
side by side in the judged regime.

For each op prints: the judged regime, the isolated paired speedup vs eager (median and 95%
interval), the user loop's (median, and its range across processes), their ratio (isolated over
loop: 1.00 is agreement), the same two against torch.compile, and the two nulls (the reference
against itself in the workers and in the loop). "within 10%" counts the ops whose vs-eager medians
agree within 10%.

Usage: python -m benchmarks.claims.agreement [--ops OP:CANDIDATE,...] [--repeats N] [--page PAGE.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.core.timing_records import PairedRatio
from forge.core.verdict import Verdict

# The shipped examples that have a candidate, the quarter-size RMSNorm (~0.2 ms eager here), and an op
# whose 64 MiB output is mapped fresh on every call
DEFAULT_OPS = (
    "examples/ops/rmsnorm.py:examples/candidates/rmsnorm_cpp.py",
    "examples/ops/layernorm.py:examples/candidates/layernorm_cpp.py",
    "examples/ops/softmax.py:examples/candidates/softmax_torch.py",
    "examples/ops/row_sum.py:examples/candidates/rowsum_torch.py",
    "examples/ops/linear_gelu.py:examples/candidates/linear_gelu_cpp.py",
    "tests/ops/quick_rmsnorm.py:examples/candidates/rmsnorm_cpp.py",
    "benchmarks/claims/wide_output/swiglu.py:benchmarks/claims/wide_output/swiglu_in_place.py",
)


@dataclass(frozen=True)
class Row:
    """One op's verification: both figures, or why there are none."""

    op: str
    regime: str = "-"
    isolated: PairedRatio | None = None
    loop: PairedRatio | None = None
    isolated_compile: PairedRatio | None = None
    loop_compile: PairedRatio | None = None
    null: PairedRatio | None = None
    loop_null: PairedRatio | None = None
    failed: str | None = None

    def agrees(self) -> bool | None:
        if self.isolated is None or self.loop is None:
            return None
        return abs(self.isolated.median / self.loop.median - 1.0) <= 0.10


def _ratio(r: PairedRatio | None) -> str:
    return f"{r.median:.2f}x ({r.low:.2f}-{r.high:.2f})" if r is not None else "-"


def _over(a: PairedRatio | None, b: PairedRatio | None) -> str:
    return f"{a.median / b.median:.2f}" if a is not None and b is not None and b.median > 0 else "-"


def verify_row(op: str, candidate: str) -> Row:
    cmd = [sys.executable, "-m", "forge", "verify", op, candidate, "--null-control", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return Row(op, failed=f"forge verify exited {done.returncode}: {done.stderr.strip()[-300:]}")
    v = Verdict.from_json(json.loads(lines[-1]))
    if not v.passed:
        return Row(op, failed=f"{v.status.value}: {(v.reason or '')[:200]}")
    stats, loop = v.timing_stats, v.user_loop
    isolated, isolated_compile = stats.headline_pairs()  # the judged regime's
    return Row(
        op,
        regime=stats.regime.value if stats.regime else "-",
        isolated=isolated,
        loop=loop.eager if loop else None,
        isolated_compile=isolated_compile,
        loop_compile=loop.compiled if loop else None,
        null=stats.null_eager,
        loop_null=loop.null if loop else None,
    )


def table(rows: list[Row]) -> list[str]:
    head = (
        "| op | judged | x eager isolated | x eager user loop | isolated / loop | x compile isolated "
        "| x compile user loop | null (workers) | null (loop) |"
    )
    out = [head, "|" + "---|" * 9]
    for r in rows:
        if r.failed:
            out.append(f"| {r.op} | {r.failed} |" + " |" * 7)
            continue
        cells = [r.op, r.regime, _ratio(r.isolated), _ratio(r.loop), _over(r.isolated, r.loop)]
        cells += [_ratio(r.isolated_compile), _ratio(r.loop_compile), _ratio(r.null), _ratio(r.loop_null)]
        out.append("| " + " | ".join(cells) + " |")
    judged = [r.agrees() for r in rows if r.agrees() is not None]
    out.append("")
    out.append(f"within 10%: {sum(bool(a) for a in judged)} of {len(judged)} verified ops (x eager medians)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ops", default=",".join(DEFAULT_OPS), help="OP:CANDIDATE pairs, comma-separated")
    parser.add_argument("--repeats", type=int, default=1, help="verify each op this many times")
    add_page_option(parser)
    args = parser.parse_args(argv)
    rows: list[Row] = []
    print("\n".join(table([])[:2]), flush=True)
    for pair in args.ops.split(","):
        op, candidate = pair.split(":")
        for _ in range(args.repeats):
            rows.append(verify_row(op, candidate))
            print(table(rows[-1:])[2], flush=True)
    print("\n".join(table(rows)[-2:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "The verifier's figure beside a user's loop"))
