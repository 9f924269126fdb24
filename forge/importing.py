"""Importing a Python file as a named module (op files, candidates, bank sources).

Light on purpose: the kernel-bank runtime uses it too.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


def import_file(name: str, path: str | Path) -> types.ModuleType:
    """Execute ``path`` as module ``name``, registered in sys.modules (removed again if it raises)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{str(path)!r} cannot be imported as a Python module (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
