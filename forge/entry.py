"""The ``forge`` command as installed: the CLI's commands and ``forge tui``. It lives above both
front ends because it is the one place that joins them (they do not import each other)."""

from __future__ import annotations

import sys
import traceback

from forge.cli import app
from forge.core.exit_codes import ExitCode
from forge.core.version import VERSION
from forge.tui import tui_command

app.command("tui")(tui_command)

BUG_NOTE = (
    f"forge {VERSION}: this is a bug in forge, not a mistake in your files or flags: please report it "
    "with the traceback above and the command you ran"
)


def main() -> None:
    """The commands print a user's mistake (a ``ForgeError``) as one line and exit with its code;
    whatever else escapes them is forge's own failure: its traceback, then what to do with it."""
    try:
        app(standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(ExitCode.INTERRUPTED)
    except Exception:
        traceback.print_exc()
        print(BUG_NOTE, file=sys.stderr)
        sys.exit(ExitCode.BUG)
