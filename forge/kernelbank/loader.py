"""Turning bank rows into Python objects: reference modules, kernel classes, validator checks.

Everything is cached per process: a reference module per op hash, a kernel module per kernel id
(each under a unique module name), and the set of kernels found bad in this process.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import types
import warnings
from pathlib import Path
from typing import Any

from forge.bank_schema import KernelEntry, OpRecord
from forge.core.identity import normalized_hash, op_identity
from forge.core.importing import import_file, reference_registered_while


class KernelBankWarning(UserWarning):
    """A bank kernel was not used (stale, invalid, broken, disabled); the reference ran instead."""


_warned: set[str] = set()
bad_kernels: dict[str, str] = {}  # KernelEntry.key -> why
_reference_modules: dict[str, types.ModuleType] = {}
_kernel_modules: dict[str, types.ModuleType] = {}  # KernelEntry.key -> module


def warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, KernelBankWarning, stacklevel=4)


def mark_bad(entry: KernelEntry, why: str) -> None:
    bad_kernels[entry.key] = why
    warn_once(
        f"bad:{entry.key}",
        f"forge kernel bank: kernel {entry.id} for {entry.op_name!r} disabled for this process: {why}",
    )


def _source_file(kind: str, source: str) -> Path:
    """Kernel sources are imported from files (Triton's @jit reads its source with inspect)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    for root in (os.environ.get("FORGE_CACHE_DIR"), None):
        if root is None:
            try:
                import platformdirs

                root = platformdirs.user_cache_dir("forge")
            except ImportError:
                continue
        folder = Path(root) / "bank-sources"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{kind}_{digest}.py"
            if not path.exists():
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(source)
                tmp.replace(path)
            return path
        except OSError:
            continue
    path = Path(tempfile.gettempdir()) / f"forge_{kind}_{digest}_{os.getpid()}.py"
    path.write_text(source)
    return path


def reference_module(problem: OpRecord) -> types.ModuleType:
    """The op file as stored in the bank, imported once per process (its Model may come from user code)."""
    key = problem.op_hash
    if key not in _reference_modules:
        name = f"forge_bank_ref_{problem.name}_{key[:10]}".replace("-", "_").replace(".", "_")
        _reference_modules[key] = import_file(name, _source_file("ref", problem.source))
    return _reference_modules[key]


def current_hash(problem: OpRecord, module: types.ModuleType) -> str:
    """The identity of the reference as it is *now* (the user's class may have changed)."""
    model = getattr(module, "Model", None)
    imported = problem.target_class_path is not None and isinstance(model, type)
    return op_identity(normalized_hash(problem.source), model if imported else None)


def kernel_class(entry: KernelEntry, ref_module: types.ModuleType) -> type:
    """Import a kernel's source (``forge_reference`` resolves to its op) and return ModelNew."""
    module = _kernel_modules.get(entry.key)
    if module is None:
        with reference_registered_while(ref_module):
            name = f"forge_bank_kernel_{entry.key.replace(':', '_')}"
            module = import_file(name, _source_file("k", entry.source))
        _kernel_modules[entry.key] = module
    cls = getattr(module, entry.entry_point, None)
    if not isinstance(cls, type):
        raise ImportError(f"the kernel source defines no class {entry.entry_point}")
    return cls


def _version(v: str | None) -> str:
    return (v or "").split("+", 1)[0]


def _cap(v: str | None) -> tuple[int, ...] | None:
    return tuple(int(p) for p in v.split(".")) if v else None


def invalid_reason(entry: KernelEntry, ref_hash: str, capability: str | None) -> str | None:
    """Why an entry may not be used here, or None. Device kind and dtype are checked per call."""
    import torch

    if entry.op_hash != ref_hash:
        return "its op hash no longer matches the reference source (the reference changed; re-verify)"
    if _version(entry.torch_version) != _version(torch.__version__):
        return f"verified with torch {entry.torch_version}, this is torch {torch.__version__}"
    if entry.backend == "triton":
        try:
            import triton

            have: Any = triton.__version__
        except ImportError:
            have = None
        if _version(entry.triton_version) != _version(have):
            return f"verified with triton {entry.triton_version}, this process has {have}"
    if entry.device_kind == "cuda" and capability is not None:
        low, high, cur = _cap(entry.capability_min), _cap(entry.capability_max), _cap(capability)
        if (low and cur and cur < low) or (high and cur and cur > high):
            span = f"{entry.capability_min}-{entry.capability_max}"
            return f"verified for compute capability {span}, this GPU is {capability}"
    return None
