"""What ``forge optimize MODEL --modules`` prints: the classes and why each was or was not
optimized, the ops with their expected gain for the model (Amdahl), and the model's four ways
timed (eager, kernelized, torch.compile, kernelized + compiled) with 95% intervals."""

from __future__ import annotations

from rich.table import Table

from forge import harness
from forge.cli.console import out, print_wide
from forge.core.model_records import FourWay
from forge.core.timing_records import PairedRatio
from forge.present import fmt_times


def _ratio(r: PairedRatio | None) -> str:
    return f"{r.median:.2f}x ({r.low:.2f}-{r.high:.2f})" if r is not None else "—"


def four_way_table(timings: list[FourWay]) -> Table:
    table = Table(title="the model, timed four ways (median per forward; speedup, 95% CI)", header_style="bold")
    for col in ("regime", "eager", "kernelized", "torch.compile", "kernelized+compile", "vs compile"):
        table.add_column(col, no_wrap=True)
    for t in timings:
        table.add_row(
            f"{t.regime} ({t.rounds} rounds)",
            f"{t.eager_ms:.3f} ms",
            f"{t.kernelized_ms:.3f} ms  {_ratio(t.kernelized_vs_eager)}",
            f"{t.compiled_ms:.3f} ms  {_ratio(t.compiled_vs_eager)}" if t.compiled_ms is not None else "—",
            f"{t.kernelized_compiled_ms:.3f} ms  {_ratio(t.kernelized_compiled_vs_eager)}"
            if t.kernelized_compiled_ms is not None
            else "—",
            _ratio(t.kernelized_compiled_vs_compiled),
        )
    return table


def model_summary(result: harness.ModelRunResult) -> None:
    classes = Table(title=f"{result.model}: {result.profile.forward_ms:.2f} ms a forward", header_style="bold")
    for col in ("class", "share", "", "why"):
        classes.add_column(col, no_wrap=col != "why")
    for c in result.choices:
        mark = "[green]optimized[/]" if c.chosen else "[dim]left out[/]"
        classes.add_row(c.cls.key, f"{c.cls.share:.1%}", mark, c.reason)
    print_wide(classes)
    if result.ops:
        ops = Table(header_style="bold")
        for col in ("op", "share", "kernel", "x eager", "x compile", "model gain (Amdahl)"):
            ops.add_column(col, no_wrap=True)
        for o in result.ops:
            r, data = o.result, o.to_json()
            kernel = f"[green]{r.kernel_id}[/]" if r is not None and r.accepted else "[red]none[/]"
            only = " eager only" if data["eager_only"] and data["accepted"] else ""
            gain = data["expected_model_gain"]
            ops.add_row(
                o.group.name,
                f"{o.group.share:.1%}",
                kernel,
                fmt_times(data["speedup_vs_eager"]),
                fmt_times(data["speedup_vs_compile"]) + only,
                f"{gain:.3f}x" if gain else "—",
            )
        print_wide(ops)
        for o in result.ops:
            if o.result is not None and not o.result.accepted:
                out.print(f"{o.group.name}: {o.result.reason}", soft_wrap=True)
    proof = result.proof
    if proof is None:
        out.print(f"[red]the kernelized model was not proven[/]: {result.proof_error}", soft_wrap=True)
        return
    used = ", ".join(f"{u.op} {u.kernel_calls}/{u.calls} calls" for u in proof.ops) or "no kernel"
    verdict = "[green]match[/]" if proof.outputs_match else f"[red]differ[/]: {proof.detail}"
    worst = f", largest difference {proof.max_abs_diff:.2e}" if proof.max_abs_diff is not None else ""
    out.print(
        f"kernelized {proof.kernelized} instances ({used}); outputs on fresh inputs {verdict} "
        f"({proof.tolerance}{worst})",
        soft_wrap=True,
    )
    for line in proof.warnings:
        out.print(f"[yellow]bank:[/] {line}", soft_wrap=True)
    if proof.compile_error:
        out.print(f"[yellow]torch.compile:[/] {proof.compile_error}", soft_wrap=True)
    if proof.timings:
        print_wide(four_way_table(proof.timings))
