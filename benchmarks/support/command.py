"""How the running benchmark was started: as every benchmark is run, ``python -m PACKAGE.MODULE``
from the checkout's root (or a script run by path), so that it can name itself on a page and start
itself again."""

from __future__ import annotations

import sys


def started_as() -> list[str]:
    """What came between the interpreter and the arguments: ``-m MODULE`` (a package, for its
    ``__main__``), or the script's path for one run by path."""
    spec = sys.modules["__main__"].__spec__
    return [sys.argv[0]] if spec is None else ["-m", spec.name.removesuffix(".__main__")]


def restart_argv() -> list[str]:
    """The command line that starts this process again, with the same arguments."""
    return [sys.executable, *started_as(), *sys.argv[1:]]
