"""The ``forge`` command: its typer app, with one module per command group beneath it."""

from __future__ import annotations

import typer

from forge.cli.bank_cmd import bank_app
from forge.cli.doctor_cmd import doctor_command
from forge.cli.help_format import PlainHelpGroup
from forge.cli.optimize_cmd import optimize_command
from forge.cli.plan_cmd import plan_command
from forge.cli.verify_cmd import verify
from forge.core.version import VERSION

app = typer.Typer(
    cls=PlainHelpGroup,
    add_completion=False,
    no_args_is_help=True,
    help="forge: verified kernels from PyTorch reference ops.",
)


def _print_version(asked: bool) -> None:
    if asked:
        print(f"forge {VERSION}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print forge's version and exit."
    ),
) -> None:
    """forge: verified kernels from PyTorch reference ops."""


app.command()(verify)
app.command("optimize")(optimize_command)
app.command("plan")(plan_command)
app.add_typer(bank_app, name="bank")
app.command("doctor")(doctor_command)


def main() -> None:
    app()
