"""``python -m forge.core.sandbox.entry MODULE ARGS...``: enter the sandbox the environment names,
then run ``MODULE`` as ``__main__``.

A worker started by exec imports torch before its own code runs (its package does), and torch's
import starts a thread, which Landlock would leave unconfined: this entry point confines the
process while it still has one thread. It imports nothing of forge's above this package."""

from __future__ import annotations

import os
import runpy
import sys

from forge.core.sandbox.policy import SandboxError, enter_from_env


def python_argv(module: str, *args: str) -> list[str]:
    """The command line that runs ``module`` as ``__main__`` in a fresh interpreter, confined first.
    ``-s``: no user site-packages (a worker's home is its own folder, which it writes, and a
    ``.pth`` it left there would run in the next process before the confinement). ``-P``: the
    working directory is not put first on the import path, where a project's ``secrets.py``
    would be imported for the standard library's, unconfined (``main`` puts it last)."""
    return [sys.executable, "-s", "-P", "-m", "forge.core.sandbox.entry", module, *args]


def main() -> None:
    try:
        enter_from_env()
    except SandboxError as exc:
        print(f"forge: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    module, sys.argv = sys.argv[1], sys.argv[1:]
    sys.path.append(os.getcwd())  # the user's modules beside the op, after the installation's
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
