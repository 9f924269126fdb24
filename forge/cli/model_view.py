"""What ``forge optimize MODEL --modules`` prints: the classes and why each was or was not
optimized, the ops (the instances each stands for and where its kernel was verified, what each
cost, its expected gain for the model by Amdahl), and the model's four ways timed (eager,
kernelized, torch.compile, kernelized + compiled) with 95% intervals."""

from __future__ import annotations

from rich.table import Table

from forge import harness
from forge.cli.console import out, print_wide
from forge.core.model_records import FourWay, OpCalls, TrainingProof
from forge.present import (
    CLASS_COLUMNS,
    FOUR_WAY_COLUMNS,
    OP_COLUMNS,
    class_cells,
    four_way_cells,
    op_cells,
    ratio_text,
)

_FOUR_WAYS = "the model, timed four ways (median per forward; speedup, 95% CI; nulls: eager / compiled beside a copy)"
_TRAINING_STEPS = "the model's training step (median per step; speedup, 95% CI; null: eager beside a copy)"


def four_way_table(timings: list[FourWay], title: str = _FOUR_WAYS) -> Table:
    table = Table(title=title, header_style="bold")
    for col in FOUR_WAY_COLUMNS:  # a narrow terminal wraps a cell ("1.28x" under "17.5 ms") rather than cut it
        table.add_column(col, no_wrap=col == "regime", overflow="fold")
    for t in timings:
        table.add_row(*four_way_cells(t))
    return table


def model_summary(result: harness.ModelRunResult) -> None:
    classes = Table(title=f"{result.model}: {result.profile.forward_ms:.2f} ms a forward", header_style="bold")
    for col in CLASS_COLUMNS:
        classes.add_column(col, no_wrap=col != "why")
    for key, share, mark, why in class_cells(result):
        classes.add_row(key, share, f"[green]{mark}[/]" if mark == "optimized" else f"[dim]{mark}[/]", why)
    print_wide(classes)
    if result.ops:
        ops = Table(header_style="bold")
        for col in OP_COLUMNS:
            ops.add_column(col, no_wrap=True)
        for o in result.ops:
            cells = list(op_cells(o))
            colour = "green" if o.accepted else "red"
            cells[3] = f"[{colour}]{cells[3]}[/]"
            ops.add_row(*cells)
        print_wide(ops)
        for o in result.ops:
            if o.result is not None and not o.result.accepted:
                out.print(f"{o.group.name}: {o.result.reason}", soft_wrap=True)
            for c in o.instances.checks if o.instances is not None else []:
                if not c.outcome.binds:
                    out.print(f"{o.group.name}: [red]{c.outcome} on {c.path}[/]: {c.detail}", soft_wrap=True)
    proof = result.proof
    if proof is None:
        out.print(f"[red]the kernelized model was not proven[/]: {result.proof_error}", soft_wrap=True)
        return
    used, verdict = _compared(proof.ops, proof.outputs_match, proof.detail, proof.tolerance, proof.max_abs_diff)
    out.print(f"kernelized {proof.kernelized} instances ({used}); outputs on fresh inputs {verdict}", soft_wrap=True)
    for line in result.compile_demoted:
        out.print(f"[yellow]under torch.compile:[/] {line}", soft_wrap=True)
    for line in result.training_demoted:
        out.print(f"[yellow]under autograd:[/] {line}", soft_wrap=True)
    for line in proof.warnings:
        out.print(f"[yellow]bank:[/] {line}", soft_wrap=True)
    if proof.compile_error:
        out.print(f"[yellow]torch.compile:[/] {proof.compile_error}", soft_wrap=True)
    if proof.timings:
        print_wide(four_way_table(proof.timings), whole=True)
    _training_summary(proof.training)


def _compared(ops: list[OpCalls], match: bool, detail: str, tolerance: str, worst: float | None) -> tuple[str, str]:
    """The ops' kernel calls ("op 2/2 calls"), and the comparison's verdict with its tolerance."""
    used = ", ".join(f"{u.op} {u.kernel_calls}/{u.calls} calls" for u in ops) or "no kernel"
    verdict = "[green]match[/]" if match else f"[red]differ[/]: {detail}"
    largest = f", largest difference {worst:.2e}" if worst is not None else ""
    return used, f"{verdict} ({tolerance}{largest})"


def _training_summary(proof: TrainingProof | None) -> None:
    """The training step's proof (``--train``): gradients compared, kernels that ran, steps timed."""
    if proof is None:
        return
    used, verdict = _compared(proof.ops, proof.gradients_match, proof.detail, proof.tolerance, proof.max_abs_diff)
    out.print(f"training step (training kernels: {used}); outputs and parameter gradients {verdict}", soft_wrap=True)
    if proof.timings:  # eager and kernelized steps only: the compiled ways are not timed in training
        table = Table(title=_TRAINING_STEPS, header_style="bold")
        for col in ("regime", "eager", "kernelized", "null"):
            table.add_column(col, no_wrap=col == "regime", overflow="fold")
        for t in proof.timings:
            cells = four_way_cells(t)
            table.add_row(cells[0], cells[1], cells[2], ratio_text(t.eager_null))
        print_wide(table, whole=True)
