"""``forge optimize MODEL.py --parallel``: a parallel-plan session's events on stderr, its result on
stdout (a table of the plans the cost model ranked, predicted beside measured)."""

from __future__ import annotations

from rich.table import Table

from forge import harness
from forge.cli.console import err, out, print_wide
from forge.core.statuses import AttemptStatus
from forge.harness import events
from forge.present import fmt_step


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
