"""The forge command run in the test's process (typer's runner): the command's own code, without a
fresh interpreter importing torch, forge and a verifier's template again. An exception other than
the command's exit is raised: a traceback is what the CLI tests are there to rule out."""

from __future__ import annotations

from click.testing import Result
from typer.testing import CliRunner

from forge.entry import app  # the whole command line, `forge tui` included


def invoke_here(args: list[str], env: dict[str, str]) -> Result:
    done = CliRunner().invoke(app, args, env=env)
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return done
