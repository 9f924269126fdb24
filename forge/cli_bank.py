"""``forge bank ...``: list, show, export, import, remove and re-verify bank entries (a thin view)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from forge.errors import ForgeError

bank_app = typer.Typer(no_args_is_help=True, help="Inspect and manage the kernel bank.")
BankOpt = Annotated[Path | None, typer.Option("--bank", help="bank file (default: $FORGE_BANK or the per-user bank)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON on stdout")]


def _engine(bank: Path | None, must_exist: bool = True) -> Any:
    """The bank, migrated if it is older; a missing bank is an error unless we are adding to it."""
    from forge.db.engine import open_for_writing
    from forge.db.paths import default_bank_path
    from forge.errors import BankError

    path = (bank or default_bank_path()).expanduser()
    if must_exist and not path.is_file():
        raise BankError(f"no kernel bank at {str(path)!r}; `forge verify OP CAND --save` creates it")
    return open_for_writing(path)


def _run(fn: Any, as_json: bool) -> Any:
    from forge.cli import _fail

    try:
        return fn()
    except ForgeError as exc:
        _fail(exc, as_json)


def _x(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}x"


@bank_app.command("list")
def list_(
    op: Annotated[str | None, typer.Option(help="only this op")] = None, bank: BankOpt = None, as_json: JsonOpt = False
) -> None:
    """List bank entries."""
    from forge.cli import out
    from forge.db.store import list_kernels

    rows = _run(lambda: list_kernels(_engine(bank), op), as_json)
    if as_json:
        print(json.dumps(rows))
        return
    table = Table(header_style="bold")
    for name in ("id", "op", "backend", "device", "dtype", "×eager", "×compile", "status", "agent"):
        table.add_column(name, no_wrap=name in ("id", "op", "status"), overflow="fold")
    for r in rows:
        table.add_row(
            str(r["id"]),
            r["op"],
            r["backend"],
            r["device"] + (f" {r['capability']}" if r["capability"] else ""),
            r["dtype"],
            _x(r["speedup_vs_eager"]) + (" unconfirmed" if r.get("confirmed") is False else ""),
            _x(r["speedup_vs_compile"]),
            r["status"],
            r["agent"] or "",
        )
    out.print(table if rows else "the bank is empty")


@bank_app.command()
def show(
    kernel_id: int,
    source: Annotated[bool, typer.Option("--source", help="print the kernel's source")] = False,
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one entry: summary, evidence, configs (and source with --source)."""
    from forge.cli import out
    from forge.db.store import get_kernel, kernel_summary

    k = _run(lambda: get_kernel(_engine(bank), kernel_id), as_json)
    info = {
        **kernel_summary(k),
        "verified_shapes": k.verified_shapes,
        "configs": [{"bucket": c.bucket, "config": c.config, "timing_ms": c.timing_ms} for c in k.configs],
        "target_class": k.problem.target_class_path,
        "reason_checks": [{"name": c["name"], "passed": c["passed"]} for c in (k.evidence or {}).get("checks", [])],
    }
    if source:
        info["source"] = k.source
    if as_json:
        print(json.dumps(info))
        return
    for key, value in info.items():
        if key not in ("source", "reason_checks"):
            out.print(f"[bold]{key}:[/] {value}")
    passed = sum(1 for c in info["reason_checks"] if c["passed"])
    out.print(f"[bold]evidence:[/] {passed}/{len(info['reason_checks'])} checks passed when saved")
    if source:
        out.print(k.source, markup=False, highlight=False)


@bank_app.command()
def export(
    out_path: Annotated[Path, typer.Argument(help="the new bank file")],
    op: Annotated[list[str] | None, typer.Option(help="ops to include (repeatable; default all)")] = None,
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a standalone bank with only the given ops, to ship beside a model."""
    from forge.cli import out
    from forge.db.store import export_bank

    n = _run(lambda: export_bank(_engine(bank), out_path, op or None), as_json)
    print(json.dumps({"exported": n, "path": str(out_path)})) if as_json else out.print(
        f"exported {n} kernels to {out_path}"
    )


@bank_app.command("import")
def import_(
    in_path: Annotated[Path, typer.Argument(help="a bank file to merge in")],
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Merge another bank's entries into this one."""
    from forge.cli import out
    from forge.db.engine import open_for_writing
    from forge.db.store import copy_kernels

    def run() -> int:
        import shutil
        import tempfile

        if not in_path.is_file():
            raise ForgeError(f"{str(in_path)!r}: no such bank file")
        with tempfile.TemporaryDirectory() as tmp:  # migrate a copy: the file imported from is left as it is
            copy = Path(tmp) / "import.db"
            shutil.copyfile(in_path, copy)
            return copy_kernels(open_for_writing(copy), _engine(bank, must_exist=False))

    n = _run(run, as_json)
    print(json.dumps({"imported": n})) if as_json else out.print(f"imported {n} kernels")


@bank_app.command()
def rm(kernel_id: int, bank: BankOpt = None, as_json: JsonOpt = False) -> None:
    """Remove one entry."""
    from forge.cli import out
    from forge.db.store import remove_kernel

    _run(lambda: remove_kernel(_engine(bank), kernel_id), as_json)
    print(json.dumps({"removed": kernel_id})) if as_json else out.print(f"removed kernel {kernel_id}")


@bank_app.command("verify")
def reverify(
    kernel_id: Annotated[int | None, typer.Argument(help="entry to re-verify (default: all)")] = None,
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-verify entries on this machine and record the result (failures become status 'bad')."""
    from forge.cli import err, out
    from forge.db.store import list_kernels
    from forge.db.store import reverify as run_reverify
    from forge.settings import load_settings

    def run() -> list[dict[str, Any]]:
        engine = _engine(bank)
        ids = [kernel_id] if kernel_id is not None else [r["id"] for r in list_kernels(engine)]
        settings = load_settings()
        results = []
        for i in ids:
            err.print(f"[dim]… re-verifying kernel {i}[/]")
            v = run_reverify(engine, i, settings)
            results.append(
                {"id": i, "status": v["status"], "reason": v["reason"], "speedup_vs_eager": v["speedup_vs_eager"]}
            )
        return results

    results = _run(run, as_json)
    if as_json:
        print(json.dumps(results))
    else:
        for r in results:
            out.print(f"kernel {r['id']}: {r['status']} {r['reason'] or ''} (x eager {_x(r['speedup_vs_eager'])})")
    if any(r["status"] != "passed" for r in results):
        raise typer.Exit(1)
