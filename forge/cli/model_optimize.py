"""``forge optimize MODEL --modules``: the model-level branch of the command (its options checked
together, the run, its report); ``model_view.py`` prints the result."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from forge import harness
from forge.cli.console import err
from forge.cli.event_printer import EventPrinter
from forge.core.errors import UsageError
from forge.core.settings import ForgeSettings

__all__ = ["check_model_flags", "model_choices", "run_model"]


def check_model_flags(
    modules: bool,
    include: list[str] | None,
    exclude: list[str] | None,
    ops_dir: Path | None,
    min_share: float | None,
    prove_rounds: int | None,
    resuming: bool,
) -> None:
    """The model-only options need ``--modules``, and a model-level run is never resumed whole."""
    if not modules and (include or exclude or ops_dir is not None or min_share is not None or prove_rounds):
        raise typer.BadParameter(
            "--include, --exclude, --min-share, --prove-rounds and --ops-dir are for a model: add --modules"
        )
    if modules and resuming:
        raise typer.BadParameter(
            "a model-level run starts afresh: resume its ops' sessions by id", param_hint="--resume"
        )


def model_choices(
    include: list[str] | None,
    exclude: list[str] | None,
    ops_dir: Path | None,
    min_share: float | None,
    prove_rounds: int | None,
) -> harness.ModelChoices:
    choices = harness.ModelChoices(include=frozenset(include or ()), exclude=frozenset(exclude or ()), ops_dir=ops_dir)
    if min_share is not None:
        choices = dataclasses.replace(choices, min_share=min_share)
    if prove_rounds is not None:
        choices = dataclasses.replace(choices, prove_rounds=prove_rounds)
    return choices


def run_model(
    given: list[Path] | None,
    options: harness.OptimizeOptions,
    settings: ForgeSettings,
    choices: harness.ModelChoices,
    report: Path | None,
) -> harness.ModelRunResult:
    if not given or len(given) > 1:
        raise UsageError("--modules takes one model: MODEL.py (Model, get_inputs, get_init_inputs) or module:factory")
    result = harness.optimize_model(str(given[0]), options, settings, choices, EventPrinter())
    if report is not None:
        written = harness.write_model_report(report, result)
        err.print(f"report: {', '.join(str(p) for p in written)}")
    return result
