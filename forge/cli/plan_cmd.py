"""``forge plan MODEL.py``: a parallel-plan session (how a model is spread over ranks), its
events on stderr, its result on stdout (a table of the plans the cost model ranked, predicted
beside measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from forge import harness
from forge.cli.console import BankOpt, err, out, print_wide, report_and_exit
from forge.cli.event_printer import EventPrinter
from forge.core.errors import UsageError
from forge.core.settings import load_settings
from forge.core.statuses import AttemptStatus
from forge.harness import events
from forge.present import fmt_step


def plan_command(
    model_file: Annotated[
        Path | None,
        typer.Argument(metavar="MODEL.py", help="the model: Model, get_inputs, get_init_inputs (not with --resume)"),
    ] = None,
    world_size: Annotated[int | None, typer.Option(min=1, help="the number of ranks")] = None,
    mesh: Annotated[str | None, typer.Option(metavar="DPxTP", help="e.g. 2x2 (default: try each)")] = None,
    memory_per_device: Annotated[
        float | None, typer.Option(metavar="GIB", help="memory a device has; plans over it are refused")
    ] = None,
    train: Annotated[bool, typer.Option("--train/--infer", help="plan a training step or inference")] = True,
    simulate: Annotated[
        bool, typer.Option("--simulate", help="rank plans with the cost model alone (meshes larger than this machine)")
    ] = False,
    model: Annotated[str | None, typer.Option(help="LLM for the planner, as litellm names it (openai/...)")] = None,
    judge: Annotated[str | None, typer.Option(help="LLM for the judge (default: --model)")] = None,
    api_base: Annotated[str | None, typer.Option(help="base URL of an OpenAI-compatible server")] = None,
    rounds: Annotated[
        int | None, typer.Option(min=1, help=f"rounds of plans (default {harness.DEFAULT_PLAN_ROUNDS})")
    ] = None,
    budget_usd: Annotated[float | None, typer.Option(help="stop once the LLM cost reaches this")] = None,
    time_limit: Annotated[float | None, typer.Option(help="stop after this many seconds")] = None,
    bank: BankOpt = None,
    resume: Annotated[int | None, typer.Option(metavar="ID", help="continue a stored plan session")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print exactly one JSON object on stdout")] = False,
) -> None:
    """Find the fastest verified way to spread MODEL.py over ranks (data and tensor parallel) and
    bank it; programs apply it with forge.kernelbank.open(BANK).parallelize(model)."""
    options = harness.PlanOptions(
        world_size=world_size or 0,
        mesh=mesh,
        memory_per_device_gib=memory_per_device,
        train=train,
        simulate=simulate,
        model=model,
        judge_model=judge,
        api_base=api_base,
        rounds=rounds,
        budget_usd=budget_usd,
        time_limit_s=time_limit,
        bank=bank,
        resume=resume,
    )
    run_plan(model_file, options, as_json)


def run_plan(model_file: Path | None, options: harness.PlanOptions, as_json: bool) -> None:
    """Run one plan session, print what it found and exit with its code."""
    printer = EventPrinter()

    def emit(e: events.Event) -> None:
        if not print_plan_event(e):
            printer(e)

    def run() -> harness.PlanResult:
        if model_file is None and options.resume is None:
            raise UsageError(
                "forge plan: give MODEL.py (a file with Model, get_inputs, get_init_inputs) or --resume ID"
            )
        if model_file is not None and model_file.is_dir():
            raise UsageError(f"{model_file} is a directory: forge plan takes one model file")
        return harness.optimize_plan(model_file, options, load_settings(device="cpu"), emit)

    report_and_exit(run, as_json, plan_summary)


def print_plan_event(e: events.Event) -> bool:
    """Render a plan session's own events; False for the events ``EventPrinter`` renders."""
    if isinstance(e, events.PlanChecked):
        what = f"attempt {e.attempt_id} [{e.mesh}] {e.note}".rstrip()
        predicted = f"predicted {fmt_step(e.predicted_ms)}" if e.predicted_ms is not None else ""
        if e.status is AttemptStatus.PASSED:
            err.print(f"  {what}: [green]passed[/] {fmt_step(e.measured_ms)} a step, {predicted}", soft_wrap=True)
        elif e.status is AttemptStatus.PREDICTED:
            err.print(f"  {what}: {predicted}, {e.memory_mb or 0:.1f} MiB a device", soft_wrap=True)
        else:
            err.print(f"  {what}: [red]{e.status}[/] — {e.reason}", soft_wrap=True)
        return True
    if isinstance(e, events.PlanBanked):
        kind = "[yellow]predicted, not measured[/]" if e.simulated else f"{fmt_step(e.measured_ms)} a step"
        err.print(f"[bold]{e.problem}[/]: [green bold]plan {e.plan_id} banked[/] (mesh {e.mesh}, {kind})")
        return True
    return False


def plan_summary(r: harness.PlanResult) -> None:
    table = Table(show_header=True, header_style="bold", title="plans ranked by the cost model")
    for col in ("attempt", "mesh", "plan", "status", "predicted", "calibrated", "measured"):
        table.add_column(col, no_wrap=col != "plan")
    for row in r.ranked:
        chosen = "[green]*[/]" if row["attempt_id"] == r.attempt_id else ""
        table.add_row(
            f"{row['attempt_id']}{chosen}",
            row["mesh"],
            row["note"],
            row["status"],
            fmt_step(row["predicted_ms"]),
            fmt_step(row["calibrated_ms"]),
            fmt_step(row["measured_ms"]),
        )
    if r.ranked:
        print_wide(table)
    if r.plan_id is None:
        out.print(f"{r.problem}: no plan banked: {r.reason}", soft_wrap=True)
        return
    kind = "predicted only (--simulate): not measured" if r.simulated else f"measured {fmt_step(r.measured_ms)} a step"
    predicted = f"the cost model predicted {fmt_step(r.predicted_ms)}"
    out.print(f"{r.problem}: plan {r.plan_id} banked, mesh {r.mesh} (dp x tp), {kind}; {predicted}", soft_wrap=True)
    if r.error_before is not None:
        after = f", {r.error_after:.0%} calibrated on the runs before each" if r.error_after is not None else ""
        out.print(f"cost model error over {r.runs} real runs: {r.error_before:.0%} uncalibrated{after}", soft_wrap=True)
    if r.simulated:
        out.print(
            f"session {r.session_id}; banked as 'predicted': shown by `forge bank list`, never applied by "
            "parallelize until a run on that mesh verifies it",
            soft_wrap=True,
        )
    else:
        out.print(
            f"session {r.session_id}; apply it with forge.kernelbank.open(BANK).parallelize(model) on every rank",
            soft_wrap=True,
        )
