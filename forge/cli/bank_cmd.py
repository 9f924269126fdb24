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
from forge.cli.console import BankOpt, err, out, print_wide, run_or_fail
from forge.core.exit_codes import ExitCode
from forge.core.paths import BankLocation
from forge.core.settings import load_settings
from forge.present import (
    KERNEL_COLUMNS,
    evidence_line,
    fmt_step,
    fmt_times,
    kernel_cells,
    kernel_details,
    plan_evidence_renderable,
)

bank_app = typer.Typer(no_args_is_help=True, help="Inspect and manage the kernel bank.")
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON on stdout")]


@bank_app.command("list")
def list_command(
    op: Annotated[str | None, typer.Option(help="only this op")] = None, bank: BankOpt = None, as_json: JsonOpt = False
) -> None:
    """List bank entries: kernels, then parallel plans."""
    rows = run_or_fail(lambda: harness.bank_list(bank, op), as_json)
    plans = run_or_fail(lambda: harness.bank_plans(bank, op), as_json)
    if as_json:  # kernels as they always were; plans after them, each marked as one
        print(json.dumps([r.to_json() for r in rows] + [{"kind": "plan", **p.to_json()} for p in plans]))
        return
    table = Table(header_style="bold")
    for name in KERNEL_COLUMNS:
        table.add_column(name, no_wrap=name in ("id", "op", "status"), overflow="fold")
    for r in rows:
        table.add_row(*kernel_cells(r))
    if rows:
        print_wide(table)
    if plans:
        _plans_table(plans)
    if not rows and not plans:
        out.print("the bank is empty")


def _plans_table(plans: list[harness.PlanSummary]) -> None:
    table = Table(header_style="bold", title="parallel plans (forge bank show --plan ID)")
    for name in ("plan", "op", "mesh dp x tp", "ranks", "device", "mode", "step", "predicted", "agent", "status"):
        table.add_column(name, no_wrap=True)
    for p in plans:
        table.add_row(
            str(p.id),
            p.op,
            p.mesh,
            str(p.world_size),
            p.device,
            p.mode,
            fmt_step(p.step_ms),
            fmt_step(p.predicted_step_ms),
            p.agent or "—",
            p.status,
        )
    print_wide(table)


PlanOpt = Annotated[bool, typer.Option("--plan", help="the id is a parallel plan's, not a kernel's")]
EntryId = Annotated[int, typer.Argument(help="the kernel's id as `forge bank list` shows it (with --plan: the plan's)")]


@bank_app.command()
def show(
    kernel_id: EntryId,
    source: Annotated[bool, typer.Option("--source", help="print the kernel's source")] = False,
    plan: PlanOpt = False,
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one entry: summary, evidence, configs (and source with --source); --plan: a plan."""
    if plan:
        _show_plan(kernel_id, bank, as_json)
        return
    k = run_or_fail(lambda: harness.bank_show(bank, kernel_id), as_json)
    info = kernel_details(k, source)
    if as_json:
        print(json.dumps(info))
        return
    for key, value in info.items():
        if key not in ("source", "reason_checks", "instances"):  # "runs on" says them
            out.print(f"[bold]{key}:[/] {value}")
    out.print(f"[bold]evidence:[/] {evidence_line(k)}")
    if source:
        # verbatim: a piped console would wrap long lines at 80 columns and the saved kernel not compile
        sys.stdout.write(k.source if k.source.endswith("\n") else k.source + "\n")


def _show_plan(plan_id: int, bank: BankLocation | None, as_json: bool) -> None:
    d = run_or_fail(lambda: harness.bank_show_plan(bank, plan_id), as_json)
    info = {
        **d.summary.to_json(),
        "structure_hash": d.structure_hash[:16],
        "session": d.session_id,
        "attempt": d.attempt_id,
        "model": d.model,
        "torch": d.torch_version,
    }
    if as_json:
        print(json.dumps({**info, "plan": d.plan.to_json(), "evidence": d.evidence.to_json()}))
        return
    for key, value in info.items():
        out.print(f"[bold]{key}:[/] {value}")
    out.print("[bold]evidence:[/]")
    out.print(plan_evidence_renderable(d.evidence), soft_wrap=True)
    sys.stdout.write(json.dumps(d.plan.to_json(), indent=2) + "\n")


@bank_app.command()
def export(
    out_path: Annotated[Path, typer.Argument(help="the new bank file (with --plan: a .py file)")],
    op: Annotated[list[str] | None, typer.Option(help="ops to include (repeatable; default all)")] = None,
    plan: Annotated[int | None, typer.Option("--plan", help="write this plan as a plain-torch Python file")] = None,
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a standalone bank with only the given ops (kernels and plans), to ship beside a
    model; with --plan ID, that plan as a Python file applying it with torch.distributed alone."""
    if plan is not None:
        plan_id = plan
        run_or_fail(lambda: harness.bank_export_plan(bank, plan_id, out_path), as_json)
        print(json.dumps({"plan": plan, "path": str(out_path)})) if as_json else out.print(
            f"wrote plan {plan} to {out_path}: call its parallelize(model) on every rank"
        )
        return
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
def rm(kernel_id: EntryId, plan: PlanOpt = False, bank: BankOpt = None, as_json: JsonOpt = False) -> None:
    """Remove one entry (--plan: a parallel plan)."""
    if plan:
        run_or_fail(lambda: harness.bank_remove_plan(bank, kernel_id), as_json)
        print(json.dumps({"removed_plan": kernel_id})) if as_json else out.print(f"removed plan {kernel_id}")
        return
    run_or_fail(lambda: harness.bank_remove(bank, kernel_id), as_json)
    print(json.dumps({"removed": kernel_id})) if as_json else out.print(f"removed kernel {kernel_id}")


@bank_app.command("verify")
def reverify(
    kernel_id: Annotated[int | None, typer.Argument(help="entry to re-verify (default: all)")] = None,
    train: Annotated[
        bool,
        typer.Option(
            "--train",
            help="verify for training too (backward, training step), also entries verified for inference "
            "only (those verified for training always are)",
        ),
    ] = False,
    bank: BankOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-verify entries on this machine and record the result (failures become status 'bad')."""
    done = run_or_fail(
        lambda: harness.bank_reverify(
            bank,
            kernel_id,
            load_settings(),
            starting=lambda i: err.print(f"[dim]… re-verifying kernel {i}[/]"),
            train=train,
        ),
        as_json,
    )
    if as_json:
        print(json.dumps([_reverified_json(r) for r in done]))
    else:
        for r in done:
            v = r.verdict
            out.print(f"kernel {r.kernel_id}: {v.status} {v.reason or ''} (x eager {fmt_times(v.speedup_vs_eager)})")
            if r.training is not None:
                said = "used under autograd" if r.training.used else "not used under autograd"
                out.print(f"kernel {r.kernel_id}: training: {said}: {r.training.why}", soft_wrap=True)
    if any(not r.verdict.passed for r in done):
        raise typer.Exit(ExitCode.NO_RESULT)


def _reverified_json(r: harness.Reverified) -> dict[str, Any]:
    v = r.verdict
    training = r.training.model_dump() if r.training is not None else None
    return {
        "id": r.kernel_id,
        "status": str(v.status),
        "reason": v.reason,
        "speedup_vs_eager": v.speedup_vs_eager,
        "training": training,
    }
