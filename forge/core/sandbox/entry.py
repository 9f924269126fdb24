"""``python -m forge.core.sandbox.entry MODULE ARGS...``: enter the sandbox the environment names,
then run ``MODULE`` as ``__main__``.

A worker started by exec imports torch before its own code runs (its package does), and torch's
import starts a thread, which Landlock would leave unconfined: this entry point confines the
process while it still has one thread. It imports nothing of forge's above this package."""

from __future__ import annotations

import runpy
import sys

from forge.core.sandbox.policy import SandboxError, enter_from_env


def python_argv(module: str, *args: str) -> list[str]:
    """The command line that runs ``module`` as ``__main__`` in a fresh interpreter, confined first."""
    return [sys.executable, "-m", "forge.core.sandbox.entry", module, *args]


def main() -> None:
    try:
        enter_from_env()
    except SandboxError as exc:
        print(f"forge: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
