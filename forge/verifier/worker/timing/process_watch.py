"""What a candidate could change in a user's process to slow the reference beside it, noted before
the candidate is imported and compared after the user loop (``user_loop_worker``).

A kernel that slows only the baselines raises its own claim. The loop's timing catches a gross
slowdown, but a timing reads a busy machine the same way, so the watch looks at causes instead:

- objects replaced or added: torch's namespaces, the clock, the loop itself, the op's module (its
  functions and classes) and every class in the method resolution order of every module of the
  reference (``torch.nn.Linear.forward`` as much as ``Model.forward``). The objects themselves are
  kept and compared by identity: an id alone can be reused once the original is freed;
- the reference's modules as instances: their attributes (an instance ``forward``), hooks,
  submodules, and where and how their parameters and buffers lie (``data_ptr``, strides);
- process-wide hooks: module hooks for every module, profile and trace functions,
  ``sys.monitoring`` tools where Python has them, torch function and dispatch modes entered and
  left entered, torch's profiler left on;
- the process: torch's thread count, CPU affinity, nice value, child processes, and the CPU it
  burns while the loop's thread sleeps (a thread of the candidate's that keeps running; one that
  pauses while the kernel runs would slow only the baselines).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

# Importing Dynamo rebinds torch.manual_seed (torch wraps it to keep Dynamo out of it). Imported
# with this module, so before any watch notes torch's namespace: a candidate whose import pulls in
# Dynamo (Inductor's own code does) is not read as having replaced it.
import torch._dynamo
from torch import nn
from torch.nn.modules import module as nn_module

from forge.core.importing import REFERENCE_MODULE
from forge.verifier.worker.timing import plain_loop

# Namespaces whose entries are compared (an added entry here is not a finding: importing a torch
# submodule adds an attribute to torch).
_NAMESPACES: tuple[tuple[str, Any], ...] = (
    ("torch", torch),
    ("torch.nn.functional", torch.nn.functional),
    ("torch.Tensor", torch.Tensor),
    ("time", time),
    ("forge.verifier.worker.timing.plain_loop", plain_loop),
)
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_state_dict_hooks")
_GLOBAL_HOOKS = tuple(name for name in vars(nn_module) if name.startswith("_global_") and name.endswith("hooks"))
_IDLE_S = 0.2  # the loop's thread sleeps this long while the process's CPU time is read
_SPUN = 0.25  # more of a core than before, burnt while the loop's thread slept: something of the candidate's runs


def _classes(reference: nn.Module, op_module: ModuleType) -> dict[str, type]:
    """Every class in the MRO of every module of the reference, by qualified name (the op's own
    module named as candidates import it, ``forge_reference``)."""
    found: dict[str, type] = {}
    for m in reference.modules():
        for cls in type(m).__mro__:
            if cls is not object:
                where = REFERENCE_MODULE if cls.__module__ == op_module.__name__ else cls.__module__
                found[f"{where}.{cls.__qualname__}"] = cls
    return found


def _objects(reference: nn.Module, op_module: ModuleType) -> dict[str, object]:
    found = {f"{where}.{name}": value for where, space in _NAMESPACES for name, value in vars(space).items()}
    for name, value in vars(op_module).items():  # its functions and classes (a counter may change)
        if callable(value) or isinstance(value, ModuleType):
            found[f"forge_reference.{name}"] = value
    for where, cls in _classes(reference, op_module).items():
        found.update({f"{where}.{name}": value for name, value in vars(cls).items()})
    return found


def _tensor_place(t: torch.Tensor | None) -> tuple[Any, ...]:
    return () if t is None else (t.data_ptr(), tuple(t.stride()), tuple(t.shape), t.dtype)


def _instances(reference: nn.Module) -> dict[str, tuple[Any, ...]]:
    """The reference's modules as instances, as plain values (compared by ==)."""
    found: dict[str, tuple[Any, ...]] = {}
    for path, m in reference.named_modules():
        where = path or "the reference"
        found[f"{where}: attributes"] = tuple(sorted(vars(m)))
        found[f"{where}: hooks"] = tuple(len(getattr(m, h, {})) for h in _HOOKS)
        found[f"{where}: submodules"] = tuple(m._modules.items())  # the modules themselves: compared by identity
        tensors = [*m._parameters.items(), *m._buffers.items()]
        found[f"{where}: tensors"] = tuple((k, _tensor_place(t)) for k, t in tensors)
    return found


def _process_wide() -> dict[str, tuple[Any, ...]]:
    found: dict[str, tuple[Any, ...]] = {
        "module hooks": tuple(
            len(hooks) for name in _GLOBAL_HOOKS if hasattr(hooks := getattr(nn_module, name), "__len__")
        ),
        "torch threads": (torch.get_num_threads(),),
        "CPU affinity": tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else (),
        "nice": (os.getpriority(os.PRIO_PROCESS, 0),),
        # a mode entered for good, or the profiler left on, runs Python (or records) around every op
        "torch function and dispatch modes": (
            torch._C._len_torch_function_stack(),
            torch._C._len_torch_dispatch_stack(),
        ),
        "torch profiler": (torch.autograd._profiler_enabled(),),
    }
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        found["sys.monitoring tools"] = tuple(monitoring.get_tool(k) for k in range(6))
    return found


def _hooks() -> dict[str, object]:
    return {"sys.profile": sys.getprofile(), "sys.trace": sys.gettrace()}


def _children() -> set[int]:
    """This process's child processes (Linux; elsewhere none are read)."""
    found: set[int] = set()
    for task in Path("/proc/self/task").glob("*/children"):
        try:
            found.update(int(pid) for pid in task.read_text().split())
        except OSError:
            continue
    return found


def cpu_while_idle() -> float:
    """Cores' worth of CPU the process burns while the calling thread sleeps."""
    start = time.process_time()
    time.sleep(_IDLE_S)
    return (time.process_time() - start) / _IDLE_S


class ProcessWatch:
    """Notes the process, the reference and what it calls; ``changes`` says what differs now."""

    def __init__(self, reference: nn.Module, op_module: ModuleType) -> None:
        self.reference, self.op_module = reference, op_module
        self.objects = _objects(reference, op_module) | _hooks()
        self.class_names = {where: set(vars(cls)) for where, cls in _classes(reference, op_module).items()}
        self.values = _instances(reference) | _process_wide()
        self.children = _children()
        self.idle = cpu_while_idle()

    def changes(self) -> list[str]:
        """What the candidate changed since the watch began, one line per kind of change."""
        now = _objects(self.reference, self.op_module) | _hooks()
        replaced = sorted(name for name, was in self.objects.items() if now.get(name) is not was)
        added = sorted(
            f"{where}.{name}"
            for where, cls in _classes(self.reference, self.op_module).items()
            for name in set(vars(cls)) - self.class_names.get(where, set())
        )
        values = _instances(self.reference) | _process_wide()
        found = [
            f"{what} {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}"
            for what, names in (("replaced", replaced), ("added", added))
            if names
        ]
        found += [f"changed {what}" for what, was in self.values.items() if values.get(what) != was]
        if started := sorted(_children() - self.children):
            found.append(f"started child processes {started[:8]}")
        if (spun := cpu_while_idle()) > self.idle + _SPUN:
            found.append(
                f"the process burnt {spun:.2f} cores while the loop slept (before the candidate: {self.idle:.2f})"
            )
        return found


__all__ = ["ProcessWatch", "cpu_while_idle"]
