"""The runtime: open a bank read-only, load or patch in verified kernels, fall back safely.

    import forge.kernelbank as kb
    bank = kb.open("kernels.db")
    layer = bank.load("rmsnorm", 1024, 1e-6)      # best verified kernel, or the reference
    n = bank.kernelize(model)                     # patch instances of bank ops' target classes
    bank.restore(model)                           # undo
    with bank.watch() as seen: model(x)           # did the kernels run? seen.report()
    bank.parallelize(model)                       # on every rank: the best banked parallel plan

A kernel is used only for inputs on the device kind and dtype it was verified for; anything else,
and any kernel that fails to import, build or run, falls back to the reference with one warning.
``FORGE_KERNELBANK=off`` disables the bank; ``strict=True`` raises instead of falling back.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from contextlib import AbstractContextManager
from enum import StrEnum
from pathlib import Path
from typing import Any

import torch

from forge.bank_schema import ReadOnlyBank
from forge.core.errors import KernelUnavailableError, UnknownOpError
from forge.core.paths import BankLocation, default_bank
from forge.kernelbank import loader
from forge.kernelbank.dispatcher import first_tensor, make_forward
from forge.kernelbank.instance_kernels import InstanceKernels, ResolvedOp, instance_kernels
from forge.kernelbank.usage import Watch, watching

_ATTR = "_forge_kernel"  # set on patched instances: the op name


def bank_enabled() -> bool:
    return os.environ.get("FORGE_KERNELBANK", "on").strip().lower() not in ("off", "0", "false", "no")


def _capability() -> str | None:
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


class KernelizeMode(StrEnum):
    """Which kernels ``kernelize`` puts in place, by how the model will run.

    * ``auto``: in eager, every kernel that beat eager; while ``torch.compile`` traces the model,
      only those that also beat the compiled reference beyond the noise (the others leave their
      instances to the reference, which Inductor compiles with its neighbours);
    * ``eager``: every kernel that beat eager, compiled or not;
    * ``compile``: only kernels that beat torch.compile, compiled or not."""

    AUTO = "auto"
    EAGER = "eager"
    COMPILE = "compile"


class KernelBank:
    """A read-only view of a bank (a file or a PostgreSQL database). Create with ``forge.kernelbank.open()``."""

    def __init__(self, where: BankLocation, strict: bool = False) -> None:
        self.where = where
        self.strict = strict
        self._db = ReadOnlyBank(where)
        self._ops: dict[str, ResolvedOp] = {}

    def ops(self) -> list[str]:
        return self._db.op_names()

    def _resolve(self, name: str) -> ResolvedOp:
        if name in self._ops:
            return self._ops[name]
        problems = self._db.problems(name)
        if not problems:
            known = ", ".join(self._db.op_names()) or "none"
            raise UnknownOpError(f"op {name!r} is not in the kernel bank {str(self.where)!r} (it has: {known})")
        problem = problems[0]  # the newest reference stored under this name
        ref_module = loader.reference_module(problem)
        op = ResolvedOp(problem, ref_module, ref_module.Model)
        ref_hash = loader.current_hash(problem, ref_module)
        capability = _capability()
        for entry in self._db.entries(name):
            why = loader.invalid_reason(entry, ref_hash, capability) if bank_enabled() else "FORGE_KERNELBANK=off"
            key = (entry.device_kind, getattr(torch, entry.dtype, torch.float32))
            if why is None:
                try:
                    cls = loader.kernel_class(entry, ref_module)
                    op.table.setdefault(key, []).append((entry, cls))
                except Exception as exc:
                    why = f"its source failed to import: {type(exc).__name__}: {exc}"
                    loader.mark_bad(entry, why)
                    op.reasons.append(f"kernel {entry.id}: {why}")
            elif why is not None:
                op.reasons.append(f"kernel {entry.id}: {why}")
        if not op.table:
            why = "; ".join(op.reasons) or "the bank has no kernel for it"
            if self.strict:
                raise KernelUnavailableError(f"{name}: no usable kernel ({why})")
            loader.warn_once(f"none:{name}:{self.where}", f"forge kernel bank: using the reference for {name!r}: {why}")
        self._ops[name] = op
        return op

    def load(self, op: str, *init_args: Any, **init_kwargs: Any) -> torch.nn.Module:
        """The best verified kernel for ``op`` as a module (the reference ``Model`` when none applies).

        Inference and training need nothing chosen: a call where autograd needs gradients (grad
        mode on, an input or a parameter requiring grad) runs the kernel only if it is verified for
        training (``forge optimize --train``: its backward checked against the reference's
        autograd, its training step not slower than eager's; ``forge bank list`` marks it
        ``+train``), and the reference otherwise; every other call runs the kernel."""
        resolved = self._resolve(op)
        ref_cls = resolved.ref_cls
        if not resolved.table:
            return ref_cls(*init_args, **init_kwargs)
        # Build with the kernel for where modules are usually created: this machine's default
        # device kind and dtype (the dispatcher still picks per call).
        here = ("cuda" if torch.cuda.is_available() else "cpu", torch.get_default_dtype())
        entry, cls = (resolved.table.get(here) or next(iter(resolved.table.values())))[0]
        try:
            module = cls(*init_args, **init_kwargs)
        except Exception as exc:
            if self.strict:
                raise
            loader.mark_bad(entry, f"ModelNew(...) raised {type(exc).__name__}: {exc}")
            return ref_cls(*init_args, **init_kwargs)
        table = {key: (e, c.forward) for key, (e, c) in resolved.best().items()}
        compiled = {
            key: next(((e, c.forward) for e, c in kernels if e.beats_compile), None)
            for key, kernels in resolved.table.items()
        }
        if isinstance(module, ref_cls):
            fallback: Callable[..., Any] = ref_cls.forward
        else:  # a standalone ModelNew: fall back to a reference holding the same weights
            ref = ref_cls(*init_args, **init_kwargs)
            ref.load_state_dict(module.state_dict())

            def fallback(_self: Any, *a: Any, **k: Any) -> Any:
                return ref.to(first_tensor(a, k).device)(*a, **k)  # type: ignore[union-attr]

        used_compiled = {key: pair for key, pair in compiled.items() if pair is not None}
        forward = make_forward(module, op, table, fallback, self.strict, used_compiled)
        module.forward = types.MethodType(forward, module)
        setattr(module, _ATTR, op)
        return module

    def kernelize(self, model: torch.nn.Module, mode: KernelizeMode | str = KernelizeMode.AUTO) -> int:
        """Swap ``forward`` on every instance of a bank op's target class; returns how many.

        Each instance runs the kernel against its own parameters and attributes (see
        ``forge.core.instance_binding``); a kernel that cannot be exact on an instance leaves that
        instance on its reference forward, with one warning saying why. ``mode`` (``KernelizeMode``)
        says which kernels run in eager and which under ``torch.compile``; by default a kernel
        that does not beat torch.compile beyond the noise stays off while the model is compiled
        (one warning names them). Where gradients are needed, a kernel runs only if it is verified
        for training (see ``load``), and never under ``torch.compile``: a training step of a
        kernelized model computes the gradients the reference's autograd would.
        """
        try:
            chosen = KernelizeMode(mode)
        except ValueError:
            known = ", ".join(m.value for m in KernelizeMode)
            raise ValueError(f"kernelize: mode={mode!r}; use one of {known}") from None
        if not bank_enabled():
            loader.warn_once("off", "forge kernel bank: FORGE_KERNELBANK=off, kernelize swaps nothing (references run)")
            return 0
        targets = self._targets()
        count, eager_only = 0, {}
        for path, sub in model.named_modules():
            if _ATTR in sub.__dict__:
                continue
            matching = [op for op in targets if isinstance(sub, op.ref_cls)]
            ops = sorted(matching, key=lambda op: not op.configured_as(sub))  # verified configuration first
            found = self._bind(ops, sub, path)
            if found is None:
                continue
            op, binding = found
            eager_only.update({e.key: (op.problem.name, e) for e in binding.eager_only})
            table = binding.compiled if chosen is KernelizeMode.COMPILE else binding.eager
            if not table:
                continue
            compiled = None if chosen is KernelizeMode.EAGER else binding.compiled
            forward = make_forward(sub, op.problem.name, table, type(sub).forward, self.strict, compiled)
            sub.forward = types.MethodType(forward, sub)
            sub.__dict__[_ATTR] = op.problem.name
            count += 1
        if eager_only and chosen is not KernelizeMode.EAGER:
            where = "under torch.compile" if chosen is KernelizeMode.AUTO else "(mode='compile')"
            names = "; ".join(f"{name!r} kernel {e.id}: {e.compile_reason}" for name, e in eager_only.values())
            loader.warn_once(
                f"eager-only:{chosen}:{sorted(eager_only)}",
                f"forge kernel bank: {where} these kernels stay off and their instances run the reference "
                f"(mode='eager' uses them anyway): {names}",
            )
        return count

    def _targets(self) -> list[ResolvedOp]:
        """The ops whose reference is a user's (or torch's) class, with a usable kernel."""
        targets: list[ResolvedOp] = []
        for problem in self._db.target_problems():
            if not any(op.problem.name == problem.name for op in targets):
                op = self._resolve(problem.name)
                if op.table:
                    targets.append(op)
        return targets

    def _bind(
        self, ops: list[ResolvedOp], instance: torch.nn.Module, path: str
    ) -> tuple[ResolvedOp, InstanceKernels] | None:
        """The first op (verified configuration first) with kernels that run exactly on
        ``instance`` (at ``path`` in the model); warns why kernels were refused when none does."""
        refused: list[str] = []
        for op in ops:
            binding = instance_kernels(op, instance, path)
            if binding.eager:
                return op, binding
            refused += [f"{op.problem.name!r} {why}" for why in binding.refused]
        if refused and self.strict:
            raise KernelUnavailableError(
                f"{type(instance).__name__}: the bank's kernels cannot bind to it: {'; '.join(refused)}"
            )
        for why in refused:
            loader.warn_once(
                f"unbindable:{type(instance).__qualname__}:{why}",
                f"forge kernel bank: kernelize leaves {type(instance).__name__} instances on the reference: {why}",
            )
        return None

    def parallelize(self, model: torch.nn.Module, mesh: Any = None, *, train: bool = True) -> int | None:
        """Shard ``model`` in place with the best banked parallel plan for it on this mesh (a
        ``DeviceMesh`` with dims ("dp", "tp"), or None: the plan's own mesh over the whole world);
        call it on every rank. Returns the plan's id, or None when the model is left as it is
        (one warning; ``strict`` raises). ``train=False`` may use a plan verified for training."""
        if not bank_enabled():
            return None
        # loads torch.distributed and pydantic: only for programs that parallelize (see the module)
        from forge.kernelbank.parallelize_plan import parallelize

        return parallelize(self._db, model, mesh, train=train, strict=self.strict)

    def watch(self) -> AbstractContextManager[Watch]:
        """Count, while the ``with`` block runs, each op's calls through this bank and those in
        which its reference ran instead of the kernel (a fallback): ``seen.report()``, or
        ``seen.ops[name]`` (``OpUsage``). Only ops this bank has loaded or patched are counted."""
        return watching([op.ref_cls for op in self._ops.values()])

    def reference_class(self, op: str) -> type:
        """The class the bank's kernels for ``op`` stand in for (the op's ``Model``, or the user's
        class it imports)."""
        return self._resolve(op).ref_cls

    def restore(self, model: torch.nn.Module) -> int:
        """Undo ``kernelize``: the instances get their class's forward back. Returns how many."""
        count = 0
        for sub in model.modules():
            if sub.__dict__.pop(_ATTR, None) is not None:
                sub.__dict__.pop("forward", None)
                sub.__dict__.pop("_forge_config", None)
                count += 1
        return count


def open(path: str | Path | None = None, *, strict: bool = False) -> KernelBank:
    """Open a kernel bank read-only: a file, or a ``postgresql://`` URL (default: $FORGE_BANK,
    else the per-user bank)."""
    return KernelBank(default_bank() if path is None else BankLocation.parse(path), strict=strict)
