"""Which of an op's kernels run on one instance of the user's model (``KernelBank.kernelize``).

An op resolved in this process (``ResolvedOp``) holds its reference class and its usable kernels
per (device kind, dtype). For one instance, ``instance_kernels`` keeps, per (device kind, dtype),
the fastest kernel that runs exactly on it, and the fastest of those that beat torch.compile.

A kernel of an op carved from a model (``forge optimize --modules``) was verified on named
instances of that model (the bank's ``kernel_instances``): it runs on the instance at a path only
where its check there passed and the instance is still configured as it was then; anywhere else
(another path, weights of another shape, another epsilon) the instance keeps its reference, and
the reason is said. Its constants (a view's, see ``core.instance_binding``) are those of a kernel
built as that instance was, as the verifier built it there.
"""

from __future__ import annotations

import contextlib
import json
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from forge.bank_schema import KernelEntry, OpRecord
from forge.core.carved_ops import INSTANCE, INSTANCES
from forge.core.instance_binding import (
    BindMode,
    BindPlan,
    BindRefused,
    bound_forward,
    config_difference,
    config_text,
    plan_binding,
    signature_difference,
)

Key = tuple[str, torch.dtype]  # (device kind, dtype): what a kernel is picked by
Pair = tuple[KernelEntry, Callable[..., Any]]  # a kernel and its forward as run on one instance


@contextlib.contextmanager
def building(module: types.ModuleType, path: str | None) -> Iterator[None]:
    """``get_init_inputs()`` of a carved op builds the instance at ``path`` (its own arguments)
    while this holds, as the verifier built it to check the kernel there."""
    if path is None or path not in (getattr(module, INSTANCES, None) or ()):
        yield
        return
    saved = getattr(module, INSTANCE)
    setattr(module, INSTANCE, path)
    try:
        yield
    finally:
        setattr(module, INSTANCE, saved)


class ResolvedOp:
    """One op resolved in this process: its reference class and the usable kernels per (device
    kind, dtype), best first."""

    def __init__(self, problem: OpRecord, ref_module: types.ModuleType, ref_cls: Any) -> None:
        self.problem = problem
        self.ref_module = ref_module
        self.ref_cls = ref_cls
        self.table: dict[Key, list[tuple[KernelEntry, Any]]] = {}
        self.reasons: list[str] = []
        self._plans: dict[tuple[str, str | None], BindPlan | str] = {}  # (kernel, instance path): how it binds
        self._like: torch.nn.Module | None = None
        # a carved op's own instance (the one its search ran on); None: not carved from a model
        self.instance: str | None = getattr(ref_module, INSTANCE, None) if hasattr(ref_module, INSTANCES) else None

    def best(self) -> dict[Key, tuple[KernelEntry, Any]]:
        """The first (fastest vs eager) kernel per (device kind, dtype)."""
        return {key: kernels[0] for key, kernels in self.table.items()}

    def like(self) -> torch.nn.Module:
        """A reference built with the verified constructor arguments (once)."""
        if self._like is None:
            self._like = self.ref_cls(*self.ref_module.get_init_inputs())
        return self._like

    def configured_as(self, instance: torch.nn.Module) -> bool:
        """The instance is configured as the op's verified one (same state shapes, attributes)."""
        try:
            return config_difference(instance, self.like()) is None
        except Exception:
            return False

    def plan(self, entry: KernelEntry, cls: type, path: str | None = None) -> BindPlan | str:
        """How this kernel binds to existing instances (a plan), or why it does not (a sentence);
        ``path``: to the instance there, its constants built as that instance was."""
        key = (entry.key, path)
        if key not in self._plans:
            self._plans[key] = self._decide(entry, cls, path)
        return self._plans[key]

    def _decide(self, entry: KernelEntry, cls: type, path: str | None) -> BindPlan | str:
        if entry.binding == BindMode.NONE:
            return f"its bound form failed verification: {entry.binding_reason}"
        if entry.binding is None and not issubclass(cls, self.ref_cls):
            return (
                "it was verified before forge checked how kernels bind to instances; "
                "re-verify it (`forge bank verify`) to use it with kernelize"
            )
        try:
            with building(self.ref_module, path):
                sample = cls(*self.ref_module.get_init_inputs())
            plan = plan_binding(cls, self.ref_cls, sample, self.like())
        except Exception as exc:
            return f"building it with the op's get_init_inputs() raised {type(exc).__name__}: {exc}"
        return plan.reason if plan.mode is BindMode.NONE else plan


@dataclass
class InstanceKernels:
    """An instance's kernels: those used in eager and those used while torch.compile traces it
    (by device kind and dtype), with why kernels were left out."""

    eager: dict[Key, Pair] = field(default_factory=dict)
    compiled: dict[Key, Pair] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)  # kernels that cannot be exact on it
    eager_only: list[KernelEntry] = field(default_factory=list)  # bound, but not used under compile


def instance_refusal(op: ResolvedOp, entry: KernelEntry, instance: torch.nn.Module, path: str) -> str | None:
    """Why a kernel of a carved op does not run on the instance at ``path`` (None: it may): it
    was not verified there, failed or was refused there, or the instance is configured otherwise
    now. A kernel never checked on its op's other instances (a run stopped before, a session run
    on the op file alone) runs only on the instance its op builds."""
    if not entry.instances:
        if path != op.instance:
            return (
                f"it was verified only on the instance its op builds ({op.instance!r}), not on one at {path!r}; "
                "a model run (forge optimize --modules) checks it on the others"
            )
        differs = config_difference(instance, op.like())
        return None if differs is None else f"this instance is configured unlike the verified one ({differs})"
    record = entry.instances.get(path)
    if record is None:
        shown = ", ".join(repr(p) for p in list(entry.instances)[:3]) + (", ..." if len(entry.instances) > 3 else "")
        return (
            f"it was verified on instances of the model it was carved from ({shown}), not on one at {path!r}; "
            "kernelize that model as a whole, or carve this one (forge optimize --modules)"
        )
    if not record.outcome.binds:
        return f"it {record.outcome} on this instance ({record.detail or 'see forge bank show'})"
    differs = signature_difference(json.loads(config_text(instance)), json.loads(record.config))
    if differs is not None:
        return f"this instance is configured unlike the one it was verified on ({differs})"
    return None


def instance_kernels(op: ResolvedOp, instance: torch.nn.Module, path: str) -> InstanceKernels:
    """The op's kernels as run on ``instance`` (at ``path`` in the model kernelized): per (device
    kind, dtype), the fastest that binds exactly, and the fastest of those that beat torch.compile."""
    found = InstanceKernels()
    for key, kernels in op.table.items():
        for entry, cls in kernels:
            if key in found.compiled or (key in found.eager and not entry.beats_compile):
                continue
            try:
                pair = (entry, _bound(op, entry, cls, instance, path))
            except BindRefused as exc:
                found.refused.append(f"kernel {entry.id}: {exc}")
                continue
            found.eager.setdefault(key, pair)
            if entry.beats_compile:
                found.compiled[key] = pair
        if key in found.eager and key not in found.compiled:
            found.eager_only.append(found.eager[key][0])
    return found


def _bound(op: ResolvedOp, entry: KernelEntry, cls: type, instance: torch.nn.Module, path: str) -> Callable[..., Any]:
    """The kernel's forward on ``instance``; raises BindRefused saying why it cannot be exact there."""
    plan = op.plan(entry, cls)
    if op.instance is None:  # not carved from a model: any instance configured for its constants
        if isinstance(plan, str):
            raise BindRefused(plan)
        return bound_forward(cls, plan, instance, op.like())
    why = instance_refusal(op, entry, instance, path)
    if why is not None:
        raise BindRefused(why)
    if isinstance(plan, BindPlan) and plan.constants:  # the constants of a kernel built as this instance was
        plan = op.plan(entry, cls, path)
    if isinstance(plan, str):
        raise BindRefused(plan)
    return bound_forward(cls, plan, instance)  # its configuration was checked above
