"""The built-in coder's first candidate for every shipped example, verified (no search yet).

Prints one row per op and the geometric-mean speedups. Usage:
    python benchmarks/builtin_coder_examples.py [--no-compile-baseline]
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

from forge.agents import CoderContext
from forge.agents.builtin import BuiltinCoder
from forge.settings import load_settings
from forge.verifier import verify

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-compile-baseline", action="store_true")
    a = ap.parse_args()
    settings = load_settings(compile_baseline=not a.no_compile_baseline)
    eager, compiled = [], []
    heads = ("cand ms", "eager ms", "compile ms", "x eager", "x compile")
    print(f"{'op':16s} {'status':10s} " + " ".join(f"{h:>10s}" for h in heads))
    for op in sorted((ROOT / "examples" / "ops").glob("*.py")):
        (proposal,) = BuiltinCoder(op).propose(CoderContext(op.stem, op.read_text(), "cpu", "cpp"))
        if proposal.source is None:
            print(f"{op.stem:16s} no candidate: {proposal.error}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cand = Path(tmp) / "candidate.py"
            cand.write_text(proposal.source)
            v = verify(op, cand, settings)
        t = v.timings_ms
        if v.speedup_vs_eager:
            eager.append(v.speedup_vs_eager)
        if v.speedup_vs_compile:
            compiled.append(v.speedup_vs_compile)

        def f(x: float | None, spec: str) -> str:
            return "-" if x is None else format(x, spec)

        print(
            f"{op.stem:16s} {v.status:10s} {f(t['candidate'], '8.3f')} {f(t['eager'], '8.3f')} "
            f"{f(t['compile'], '10.3f')} {f(v.speedup_vs_eager, '7.2f')} {f(v.speedup_vs_compile, '9.2f')}",
            flush=True,
        )

    def geo(xs: list[float]) -> str:
        return f"{math.exp(sum(map(math.log, xs)) / len(xs)):.2f}x" if xs else "-"

    print(f"geometric mean: {geo(eager)} vs eager, {geo(compiled)} vs torch.compile")


if __name__ == "__main__":
    main()
