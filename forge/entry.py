"""The ``forge`` command as installed: the CLI's commands and ``forge tui``. It lives above both
front ends because it is the one place that joins them (they do not import each other)."""

from __future__ import annotations

from forge.cli import app
from forge.tui import tui_command

app.command("tui")(tui_command)


def main() -> None:
    app()
