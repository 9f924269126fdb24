"""How the CLI's model tables read piped into a file (rich assumes 80 columns there)."""

from __future__ import annotations

import io

from rich.console import Console

from forge.cli import console
from forge.cli.model_view import four_way_table
from forge.core.model_records import FourWay
from forge.core.timing_records import PairedRatio


def _ratio(median: float) -> PairedRatio:
    return PairedRatio(pairs=40, median=median, low=median - 0.04, high=median + 0.03)


def _timings() -> list[FourWay]:
    return [
        FourWay(
            regime=regime,
            rounds=40,
            eager_ms=14.62,
            kernelized_ms=12.94,
            compiled_ms=12.5,
            kernelized_compiled_ms=12.6,
            kernelized_vs_eager=_ratio(1.13),
            compiled_vs_eager=_ratio(1.17),
            kernelized_compiled_vs_eager=_ratio(1.16),
            kernelized_compiled_vs_compiled=_ratio(0.99),
            eager_null=_ratio(1.02),
            compiled_null=_ratio(1.0),
        )
        for regime in ("warm", "cold")
    ]


def test_the_four_way_table_piped_keeps_every_cell_whole(monkeypatch):
    piped = io.StringIO()
    monkeypatch.setattr(console, "out", Console(file=piped, highlight=False))  # not a terminal
    console.print_wide(four_way_table(_timings()), whole=True)
    text = piped.getvalue()
    assert "…" not in text
    for cell in ("14.620", "1.13x (1.09-1.16)", "0.99x (0.95-1.02)", "1.02x (0.98-1.05)"):
        assert cell in text, cell


def test_the_four_way_table_in_a_narrow_terminal_wraps_rather_than_cuts():
    narrow = io.StringIO()
    Console(file=narrow, width=90, force_terminal=True, color_system=None).print(four_way_table(_timings()))
    assert "…" not in narrow.getvalue()
    assert "14.620" in narrow.getvalue()
