"""The installed libraries an op imports, imported once in the worker template.

A worker forked from the template starts with torch imported, but an op carved from a
transformers or timm model imports that library again in every worker: measured on a 2-core VM,
transformers' import and the resolution of a model class took 5 of the 9 s an instance check of a
Qwen2 decoder layer cost, paid by every verification of every op of the model. So the parent
reads which installed libraries the op's source imports (``preload_spec``: the model file's
imports for an op carved from one, which every op of that model shares, so one template serves
the run; the op file's own otherwise), and the template imports them before it forks
(``preload``). Only modules from installed packages are named, never the op's or the model's own
files: the template still never loads an op or a candidate. An import that fails is left to the
worker, which reports it as it would have. A library that starts a thread when imported would
make forking unsafe; the template then starts again without them (``template_process``).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import os
import sysconfig
import threading
from pathlib import Path

PRELOAD = "FORGE_WORKER_PRELOAD"  # "module" or "module:name,name", separated by ";"
_OWN = {"torch", "forge", "__future__"}  # imported already, or this package's own


def _installed(top: str) -> bool:
    """Whether the top-level package ``top`` is an installed library (site-packages), not a file
    beside the op or the model."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    origin = spec.origin if spec is not None else None
    if not origin or origin in ("built-in", "frozen"):
        return False
    libs = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    where = Path(origin).resolve()
    return any(lib in where.parents for lib in libs)


def _imports(source: str) -> list[str]:
    """The module-level imports of ``source``, as preload entries (from-imports with their names:
    a lazy package such as transformers loads the class's module only when a name is looked up)."""
    entries: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            entries += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [a.name for a in node.names if a.name != "*"]
            entries.append(f"{node.module}:{','.join(names)}" if names else node.module)
    return entries


def model_file(source: str) -> Path | None:
    """The model file an op carved from one imports (its ``_MODEL_FILE`` constant)."""
    for node in ast.parse(source).body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
            continue
        if any(isinstance(t, ast.Name) and t.id == "_MODEL_FILE" for t in node.targets):
            value = node.value.value
            return Path(value) if isinstance(value, str) else None
    return None


def _top(entry: str) -> str:
    """An entry's top-level package ("transformers" of "transformers.models:X")."""
    return entry.partition(":")[0].split(".")[0]


def preload_spec(op_path: Path) -> str:
    """What the template imports for ``op_path``'s workers ("" for nothing): the installed
    libraries its model file imports (an op carved from a model), else those it imports."""
    try:
        source = op_path.read_text()
        model = model_file(source)
        if model is not None and model.is_file():
            source = model.read_text()
        entries = _imports(source)
    except (OSError, SyntaxError, ValueError):
        return ""
    kept = [e for e in entries if _top(e) not in _OWN and _installed(_top(e))]
    return ";".join(dict.fromkeys(kept))


def preload(spec: str) -> None:
    """Import what ``spec`` names (in the template, before any fork); a module that fails to
    import, or a name it lacks, is skipped: the worker that needs it says so itself."""
    for entry in filter(None, spec.split(";")):
        module, _, names = entry.partition(":")
        with contextlib.suppress(Exception):
            loaded = importlib.import_module(module)
            for name in filter(None, names.split(",")):
                getattr(loaded, name, None)


def thread_count() -> int:
    """This process's threads (the OS's count: a library's native threads included)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


__all__ = ["PRELOAD", "preload", "preload_spec", "thread_count"]
