"""The bottom of the CLI: its two consoles (data on stdout, progress and errors on stderr), how a
user's mistake ends a command, and how wide a piped table is."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, Protocol, TypeVar

import typer
from rich.console import Console, RenderableType

from forge.core.errors import ForgeError, UsageError
from forge.core.exit_codes import ExitCode
from forge.core.paths import BankLocation

err = Console(stderr=True, highlight=False)
out = Console(highlight=False)

T = TypeVar("T")


def parse_bank(text: str) -> BankLocation:
    """``--bank``: a SQLite file or a PostgreSQL URL; a URL of another kind is the option's error."""
    try:
        return BankLocation.parse(text)
    except UsageError as exc:
        raise typer.BadParameter(exc.message) from exc


BANK_HELP = "the bank: a SQLite file or postgresql://user@host:port/db (default: $FORGE_BANK or the per-user bank)"
BankOpt = Annotated[BankLocation | None, typer.Option("--bank", parser=parse_bank, help=BANK_HELP, show_default=False)]
UnsandboxedOpt = Annotated[
    bool,
    typer.Option(
        "--unsandboxed",
        help="run candidate code unconfined, with your environment, files and network (where the kernel "
        "offers no Landlock, the only way to run)",
    ),
]

PIPED_WIDTH = 110  # columns a table gets when stdout is not a terminal (rich would assume 80)


def print_wide(table: RenderableType, whole: bool = False) -> None:
    """A table on stdout; piped into a file or a pager it gets ``PIPED_WIDTH`` columns, so cells
    like "float32" are not broken over two lines. ``whole``: piped, as many columns as its
    cells on one line take (the model's four-way timings: at 110 columns rich had cut every
    cell to an ellipsis and squeezed the eager column to nothing)."""
    if out.is_terminal:
        out.print(table)
        return
    width = max(out.width, PIPED_WIDTH)
    if whole:
        width = max(width, Console(width=1000).measure(table).maximum)
    Console(file=out.file, highlight=False, width=width).print(table)


def fail(exc: ForgeError, as_json: bool) -> NoReturn:
    """End the command for a user's mistake: the message (and with ``--json`` an error object on
    stdout), the error's exit code, never a traceback."""
    if as_json:
        print(json.dumps({"error": {"kind": type(exc).__name__, "message": exc.message}}))
    err.print(f"[bold red]error:[/] {exc.message}", markup=True, soft_wrap=True)
    raise typer.Exit(exc.exit_code)


def run_or_fail(fn: Callable[[], T], as_json: bool) -> T:
    """``fn()``, or the command ends as ``fail`` says when it raises a ``ForgeError``."""
    try:
        return fn()
    except ForgeError as exc:
        fail(exc, as_json)


class RunOutcome(Protocol):
    """What a run returns: a kernel run's ``RunResult``, a plan session's ``PlanResult``."""

    @property
    def exit_code(self) -> int: ...

    def to_json(self) -> dict[str, Any]: ...


Outcome = TypeVar("Outcome", bound=RunOutcome)


def report_and_exit(run: Callable[[], Outcome], as_json: bool, summary: Callable[[Outcome], None]) -> NoReturn:
    """Run the engine, print its result (one JSON object, or the summary) and exit with its code;
    Ctrl-C exits 130."""
    try:
        result = run_or_fail(run, as_json)
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    if as_json:
        print(json.dumps(result.to_json()))
    else:
        summary(result)
    raise typer.Exit(result.exit_code)
