"""``forge verify``: one candidate checked and timed by the engine, its verdict printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from forge import harness
from forge.cli.console import BankOpt, UnsandboxedOpt, err, out, run_or_fail
from forge.core.exit_codes import ExitCode
from forge.core.settings import load_settings
from forge.present import verdict_renderable


def verify(
    op: Annotated[Path, typer.Argument(help="KernelBench-format op file (the reference)")],
    candidate: Annotated[Path, typer.Argument(help="candidate .py file defining ModelNew")],
    device: Annotated[str | None, typer.Option(help="cpu, cuda or auto")] = None,
    timeout: Annotated[float | None, typer.Option(help="seconds the candidate may take in all")] = None,
    memory_limit: Annotated[int | None, typer.Option(help="MiB each worker process may use")] = None,
    trials: Annotated[
        int | None, typer.Option(min=5, help="timed calls per side, at least 5 (default: about 1 s of calls, 5 to 30)")
    ] = None,
    no_compile_baseline: Annotated[
        bool, typer.Option("--no-compile-baseline", help="skip timing torch.compile of the reference")
    ] = False,
    unsandboxed: UnsandboxedOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="print exactly one JSON object on stdout")] = False,
    save: Annotated[bool, typer.Option("--save", help="store a passing candidate in the kernel bank")] = False,
    bank: BankOpt = None,
    null_control: Annotated[
        bool,
        typer.Option(
            "--null-control",
            help="also verify the reference against itself (as many calls) and say whether a session would bank it",
        ),
    ] = False,
    train: Annotated[
        bool,
        typer.Option(
            "--train",
            help="also check its backward: the gradients of the op's inputs and parameters against the "
            "reference's autograd (the candidate provides the backward)",
        ),
    ] = False,
    instance: Annotated[
        str | None,
        typer.Option(
            "--instance",
            help="an op carved from a model (FORGE_INSTANCES): build that instance of it (its own arguments "
            "and recorded calls) instead of the one it names, as forge checks a banked kernel on each",
        ),
    ] = None,
) -> None:
    """Check a candidate kernel against a reference op, in isolation, and time it."""
    if instance is not None and (save or null_control):
        raise typer.BadParameter(
            "a kernel is banked for the op's own instance: drop --save/--null-control", param_hint="--instance"
        )

    def run() -> harness.Verification:
        settings = load_settings(
            device=device,
            timeout=timeout,
            memory_limit_mb=memory_limit,
            timing_trials=trials,
            compile_baseline=False if no_compile_baseline else None,
            sandbox=False if unsandboxed else None,
            verify_gradients=True if train else None,
        )
        quiet = as_json and not sys.stderr.isatty()
        progress = (lambda m: None) if quiet else (lambda m: err.print(f"[dim]… {m}[/]"))
        return harness.verify_candidate(
            op, candidate, settings, progress, save=save, bank=bank, null_control=null_control, instance=instance
        )

    try:
        result = run_or_fail(run, as_json)
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    verdict = result.verdict
    if as_json:
        data = verdict.to_json()
        if result.kernel_id is not None:
            data["kernel_id"] = result.kernel_id
        if result.accepted is not None:
            data["acceptance"] = {"accepted": result.accepted, "reason": result.acceptance}
        print(json.dumps(data))
    else:
        out.print(verdict_renderable(verdict))
        if result.accepted is not None:
            mark = "[green]a session would bank it[/]" if result.accepted else "[yellow]a session would not bank it[/]"
            out.print(f"acceptance: {mark}: {result.acceptance}", soft_wrap=True)
        if result.kernel_id is not None:
            out.print(f"saved as kernel {result.kernel_id} in the bank")
        elif save:
            out.print("not saved: only passing candidates enter the bank")
    raise typer.Exit(ExitCode.SUCCESS if verdict.passed else ExitCode.NO_RESULT)
