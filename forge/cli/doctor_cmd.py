"""``forge doctor``: what this machine gives forge, and what to do about what is missing."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from forge import harness
from forge.cli.console import BankOpt, err, out, print_wide
from forge.core.exit_codes import ExitCode
from forge.core.settings import load_settings
from forge.present import FINDING_COLUMNS, finding_cells


def doctor_command(
    api_base: Annotated[
        list[str] | None, typer.Option(help="check that this OpenAI-compatible server answers (repeatable)")
    ] = None,
    bank: BankOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print exactly one JSON object on stdout")] = False,
) -> None:
    """Say what this machine gives forge: torch, GPUs, Triton, C++/OpenMP, ISA, measured figures,
    the bank, LLM keys (names only). Exit 0 when forge can run its main job here."""
    if not as_json:
        err.print("[dim]… checking (the first run measures bandwidth and matmul peak, then caches them)[/]")
    report = harness.doctor(load_settings(), bank, tuple(api_base or ()))
    if as_json:
        print(json.dumps(report.to_json()))
    else:
        table = Table(header_style="bold", show_lines=False)
        for col in FINDING_COLUMNS:
            table.add_column(col, overflow="fold")
        for f in report.findings:
            table.add_row(*finding_cells(f))
        print_wide(table)
        verdict = "[green]forge can run its main job here[/]" if report.can_run else "[red]forge cannot run here yet[/]"
        out.print(f"{verdict} (* = needed for it)")
    raise typer.Exit(ExitCode.SUCCESS if report.can_run else ExitCode.NO_RESULT)
