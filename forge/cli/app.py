"""The ``forge`` command: its typer app, with one module per command group beneath it."""

from __future__ import annotations

import typer

from forge.cli.bank_cmd import bank_app
from forge.cli.doctor_cmd import doctor_command
from forge.cli.optimize_cmd import optimize_command
from forge.cli.verify_cmd import verify

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="forge: verified kernels from PyTorch reference ops."
)


@app.callback()
def _root() -> None:
    """forge: verified kernels from PyTorch reference ops."""


app.command()(verify)
app.command("optimize")(optimize_command)
app.add_typer(bank_app, name="bank")
app.command("doctor")(doctor_command)


def main() -> None:
    app()
