"""Does timing a round's candidates together choose better than their separate verdicts? For each
shipped op: a candidate in plain torch, and the same candidate that first copies a part of its
input and throws the copy away (``--extra``: the part's share; slower by construction, by a few
percent at a quarter). Each repeat verifies both separately, as a round does
(the choice reads the two verdicts' speedups over eager), then times them together
(``VerifierService.time_together``, the slower one as the leader so the match has no head start
for the faster). Printed per repeat: the faster's estimated gain over the slower each way (the
verdicts' speedup ratio; the match's head-to-head median and 95% interval), and which one each
way chose; then how often each chose wrong and the spread of its estimate.

Usage: python -m benchmarks.claims.round_choice [--ops rmsnorm,softmax] [--extra 0.25] [--repeats N]
       [--page PAGE.md]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.core.settings import load_settings
from forge.verifier import Job, VerifierService

_RMSNORM = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        EXTRA
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight
"""
_SOFTMAX = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        EXTRA
        e = torch.exp(x - x.amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)
"""
SOURCES = {"rmsnorm": _RMSNORM, "softmax": _SOFTMAX}


@dataclass
class Repeat:
    separate: float | None  # the faster's speedup over eager / the slower's, from two verdicts
    together: float | None  # the slower's time over the faster's, call by call, in one match
    low: float | None
    high: float | None
    decisive: bool
    seconds: tuple[float, float]  # the two separate verifications, the match


def _repeat(service: VerifierService, fast: Job, slow: Job) -> Repeat:
    t0 = time.monotonic()
    fast_v, slow_v = service.verify([fast]), service.verify([slow])
    t1 = time.monotonic()
    match = service.time_together([slow, fast])
    t2 = time.monotonic()
    sf, ss = fast_v[0].speedup_vs_eager, slow_v[0].speedup_vs_eager
    separate = sf / ss if sf and ss else None
    pair = next((p for p in match.pairs if {p.faster, p.slower} == {"fast", "slow"}), None)
    together = low = high = None
    if match.failed is None and pair is not None:
        sign = 1 if pair.faster == "fast" else -1
        r = pair.ratio
        together, low, high = (r.median, r.low, r.high) if sign > 0 else (1 / r.median, 1 / r.high, 1 / r.low)
    decisive = match.decisive and match.winner == "fast"
    return Repeat(separate, together, low, high, decisive, (t1 - t0, t2 - t1))


def _fmt(x: float | None) -> str:
    return f"{x:.3f}" if x is not None else "-"


def _summary(name: str, rows: list[Repeat]) -> None:
    for label, values in (("separate", [r.separate for r in rows]), ("together", [r.together for r in rows])):
        got = [v for v in values if v is not None]
        wrong = sum(v < 1.0 for v in got)
        spread = f"{min(got):.3f}-{max(got):.3f}, median {statistics.median(got):.3f}" if got else "no figure"
        print(f"  {name} {label}: chose the slower {wrong} of {len(got)} times; the faster's gain read {spread}")
    decisive = sum(r.decisive for r in rows)
    sep_s = statistics.median(r.seconds[0] for r in rows)
    match_s = statistics.median(r.seconds[1] for r in rows)
    print(f"  {name}: the match chose the faster beyond the noise {decisive} of {len(rows)} times;")
    print(f"  {name}: seconds (median): two separate verifications {sep_s:.1f}, the match {match_s:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default="rmsnorm,softmax", help="shipped ops, comma-separated: rmsnorm, softmax")
    parser.add_argument("--extra", type=float, default=0.25, help="the share of its input the slower copies")
    parser.add_argument("--repeats", type=int, default=6)
    add_page_option(parser)
    args = parser.parse_args()
    print(f"the faster candidate's gain over the slower (which copies {args.extra:.0%} of its input), each repeat:")
    print("separate = its verdict's speedup over eager / the slower's; together = one match's head-to-head")
    with tempfile.TemporaryDirectory(prefix="round-choice-") as tmp:
        settings = load_settings(cache_dir=Path(tmp), compile_baseline=False)
        for name in args.ops.split(","):
            source = SOURCES[name]
            copy = f"x[: max(1, int(x.shape[0] * {args.extra}))].clone()"
            fast, slow = Job("fast", source.replace("EXTRA", "pass")), Job("slow", source.replace("EXTRA", copy))
            rows = []
            with VerifierService(ROOT / "examples" / "ops" / f"{name}.py", settings, "cpu") as service:
                for k in range(args.repeats):
                    r = _repeat(service, fast, slow)
                    rows.append(r)
                    interval = f"[{_fmt(r.low)}-{_fmt(r.high)}]"
                    said = "beyond the noise" if r.decisive else "not beyond the noise"
                    print(f"{name} {k + 1}: separate {_fmt(r.separate)}, together {_fmt(r.together)} {interval} {said}")
            _summary(name, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "A round's choice: separate verdicts against one match"))
