"""Where the benchmarks find the checkout: its root (the examples, the tests' ops and candidates
they run) and the benchmarks' own folder (the op sets and models they ship as data)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
