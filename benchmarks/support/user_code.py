"""A user's own code imported from the folder it lives in, as the user's program imports it,
without putting that folder on ``sys.path`` for everything else the benchmark imports."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

from forge.core.importing import import_file


def import_from(folder: Path, name: str) -> types.ModuleType:
    """Module ``name`` (``mylayers.norm``) of the code in ``folder``: its top-level package (or
    module file) is imported from ``folder`` under its own name, so the rest of ``name``, and a
    banked kernel's source that imports it, resolve to the same modules."""
    top = name.partition(".")[0]
    if top not in sys.modules:
        package = folder / top / "__init__.py"
        import_file(top, package if package.is_file() else folder / f"{top}.py")
    return importlib.import_module(name)
