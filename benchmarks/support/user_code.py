"""A user's own code imported from the folder it lives in, as the user's program imports it,
without putting that folder on ``sys.path`` for everything else the benchmark imports."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path


def import_from(folder: Path, name: str) -> types.ModuleType:
    """Module ``name`` (``mylayers.norm``) of the code in ``folder``: its top-level package or
    module is found in ``folder`` alone and registered in ``sys.modules``, so the rest of ``name``,
    and a banked kernel's source that imports it, resolve to the same modules."""
    top = name.partition(".")[0]
    if top not in sys.modules:
        spec = importlib.machinery.PathFinder.find_spec(top, [str(folder)])
        if spec is None or spec.loader is None:
            raise ImportError(f"no module {top!r} in {folder}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[top] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(top, None)
            raise
    return importlib.import_module(name)
