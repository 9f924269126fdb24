"""The ``forge tui`` command: its options are ``forge optimize``'s; with op files their sessions
start at once, without it opens on the sessions screen."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forge.core.choices import SEARCH_STRATEGIES, Backend, Device, Strategy, search_strategy
from forge.core.errors import ForgeError, UsageError
from forge.core.paths import BankLocation
from forge.core.settings import load_settings


def _parse_bank(text: str) -> BankLocation:
    try:
        return BankLocation.parse(text)
    except UsageError as exc:
        raise typer.BadParameter(exc.message) from exc


def _parse_strategy(text: str) -> Strategy:
    try:
        return search_strategy(text)
    except UsageError as exc:
        raise typer.BadParameter(exc.message) from exc


_BANK_HELP = "the bank: a SQLite file or postgresql://user@host/db (default: $FORGE_BANK or the per-user bank)"
BankOpt = Annotated[
    BankLocation | None, typer.Option("--bank", parser=_parse_bank, help=_BANK_HELP, show_default=False)
]


def tui_command(
    ops: Annotated[
        list[Path] | None, typer.Argument(help="op files to optimize at once (none: the sessions screen)")
    ] = None,
    model: Annotated[str | None, typer.Option(help="LLM for the coder, as litellm names it (openai/...)")] = None,
    judge: Annotated[str | None, typer.Option(help="LLM for the judge (default: --model)")] = None,
    api_base: Annotated[str | None, typer.Option(help="base URL of an OpenAI-compatible server")] = None,
    backend: Annotated[Backend, typer.Option(help="auto: Triton on CUDA, C++ on a CPU")] = Backend.AUTO,
    strategy: Annotated[
        Strategy,
        typer.Option(
            parser=_parse_strategy,
            metavar="[" + "|".join(SEARCH_STRATEGIES) + "]",
            help="refine (one trajectory) or evolve (a population)",
        ),
    ] = Strategy.REFINE,
    rounds: Annotated[int | None, typer.Option(help="rounds (evolve: generations); default 8")] = None,
    budget_usd: Annotated[float | None, typer.Option(help="stop once the LLM cost reaches this")] = None,
    time_limit: Annotated[float | None, typer.Option(help="stop after this many seconds")] = None,
    workers: Annotated[int, typer.Option(help="verifications run in parallel")] = 1,
    device: Annotated[Device | None, typer.Option(help="auto takes CUDA where there is a GPU")] = None,
    train: Annotated[
        bool,
        typer.Option(
            "--train", help="kernels for training: the ops given start --train sessions, and the form starts ticked"
        ),
    ] = False,
    bank: BankOpt = None,
) -> None:
    """Live optimization sessions and the kernel bank in a terminal UI (F1 for its keys)."""
    from forge import harness
    from forge.tui.app import ForgeApp, TuiLaunch

    options = harness.OptimizeOptions(
        model=model,
        judge_model=judge,
        api_base=api_base,
        backend=backend,
        strategy=strategy,
        rounds=rounds,
        workers=workers,
        bank=bank,
        budget_usd=budget_usd,
        time_limit_s=time_limit,
        train=train,
    )
    try:
        settings = load_settings(device=device)
        options.check()
        if ops:
            problems = harness.preflight(list(ops), options, settings)
            if problems:
                raise ForgeError("; ".join(p.message for p in problems))
    except ForgeError as exc:
        typer.secho(f"error: {exc.message}", fg="red", err=True)
        raise typer.Exit(exc.exit_code) from None
    ForgeApp(TuiLaunch(list(ops or []), options, settings)).run()
