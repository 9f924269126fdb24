"""``forge bank ...``: list, show, export, import, remove and re-verify bank entries (a view over
the engine's bank operations)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from forge import harness
from forge.cli.console import err, out, print_wide, run_or_fail
from forge.core.settings import load_settings
from forge.present import KERNEL_COLUMNS, evidence_line, fmt_times, kernel_cells, kernel_details

bank_app = typer.Typer(no_args_is_help=True, help="Inspect and manage the kernel bank.")
BankOpt = Annotated[Path | None, typer.Option("--bank", help="bank file (default: $FORGE_BANK or the per-user bank)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON on stdout")]


@bank_app.command("list")
def list_command(
    op: Annotated[str | None, typer.Option(help="only this op")] = None, bank: BankOpt = None, as_json: JsonOpt = False
) -> None:
    """List bank entries."""
    rows = run_or_fail(lambda: harness.bank_list(bank, op), as_json)
    if as_json:
        print(json.dumps([r.to_json() for r in rows]))
        return
    table = Table(header_style="bold")
    for name in KERNEL_COLUMNS:
        table.add_column(name, no_wrap=name in ("id", "op", "status"), overflow="fold")
    for r in rows:
        table.add_row(*kernel_cells(r))
    if rows:
        print_wide(table)
    else:
        out.print("the bank is empty")


@bank_app.command()
def show(
    kernel_id: int,
    source: Annotated[bool, typer.Option("--source", help="print the kernel's source")] = False,
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one entry: summary, evidence, configs (and source with --source)."""
    k = run_or_fail(lambda: harness.bank_show(bank, kernel_id), as_json)
    info = kernel_details(k, source)
    if as_json:
        print(json.dumps(info))
        return
    for key, value in info.items():
        if key not in ("source", "reason_checks"):
            out.print(f"[bold]{key}:[/] {value}")
    out.print(f"[bold]evidence:[/] {evidence_line(k)}")
    if source:
        # verbatim: a piped console would wrap long lines at 80 columns and the saved kernel not compile
        sys.stdout.write(k.source if k.source.endswith("\n") else k.source + "\n")


@bank_app.command()
def export(
    out_path: Annotated[Path, typer.Argument(help="the new bank file")],
    op: Annotated[list[str] | None, typer.Option(help="ops to include (repeatable; default all)")] = None,
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a standalone bank with only the given ops, to ship beside a model."""
    n = run_or_fail(lambda: harness.bank_export(bank, out_path, op or None), as_json)
    if as_json:
        print(json.dumps({"exported": n, "path": str(out_path)}))
    else:
        out.print(f"exported {n} kernels to {out_path}")


@bank_app.command("import")
def import_command(
    in_path: Annotated[Path, typer.Argument(help="a bank file to merge in")],
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Merge another bank's entries into this one."""
    n = run_or_fail(lambda: harness.bank_import(bank, in_path), as_json)
    print(json.dumps({"imported": n})) if as_json else out.print(f"imported {n} kernels")


@bank_app.command()
def rm(kernel_id: int, bank: BankOpt = None, as_json: JsonOpt = False) -> None:
    """Remove one entry."""
    run_or_fail(lambda: harness.bank_remove(bank, kernel_id), as_json)
    print(json.dumps({"removed": kernel_id})) if as_json else out.print(f"removed kernel {kernel_id}")


@bank_app.command("verify")
def reverify(
    kernel_id: Annotated[int | None, typer.Argument(help="entry to re-verify (default: all)")] = None,
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-verify entries on this machine and record the result (failures become status 'bad')."""
    done = run_or_fail(
        lambda: harness.bank_reverify(
            bank, kernel_id, load_settings(), starting=lambda i: err.print(f"[dim]… re-verifying kernel {i}[/]")
        ),
        as_json,
    )
    if as_json:
        print(json.dumps([_reverified_json(r) for r in done]))
    else:
        for r in done:
            v = r.verdict
            out.print(f"kernel {r.kernel_id}: {v.status} {v.reason or ''} (x eager {fmt_times(v.speedup_vs_eager)})")
    if any(not r.verdict.passed for r in done):
        raise typer.Exit(1)


def _reverified_json(r: harness.Reverified) -> dict[str, Any]:
    v = r.verdict
    return {"id": r.kernel_id, "status": str(v.status), "reason": v.reason, "speedup_vs_eager": v.speedup_vs_eager}
