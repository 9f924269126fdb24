"""How a kernel class runs on an existing instance of the user's layer (``bank.kernelize``).

A kernel comes in one of two forms: a subclass of the reference ``Model`` overriding ``forward``,
or KernelBench's standalone ``class ModelNew(nn.Module)`` with the reference's constructor and
parameter names. Either way kernelize never builds a second copy of the layer: the kernel's
``forward`` runs against the instance's own, live parameters, buffers, submodules and attributes,
so training, ``.to()`` and ``load_state_dict`` on the instance are seen by the kernel at once.

* ``direct``: the kernel's class adds nothing the instance lacks (no helper methods, no
  attributes of its own, no zero-argument ``super()``), so its ``forward`` is called with the
  instance itself as ``self``: no indirection at all.
* ``view``: the kernel keeps constants of its own (a compiled library, a block size) or calls its
  own methods: its ``forward`` runs on a per-instance *view*, an object of the kernel's class whose
  attributes are the kernel's constants (from one kernel built with the verified constructor
  arguments) and, for every other name, the instance's. Constants may depend on constructor
  arguments, so a view is only made for an instance configured as the verified one (same state
  shapes, same plain attributes); another instance keeps its reference forward.
* ``none``: the kernel holds tensor state or submodules the reference lacks (a precomputed table),
  which an existing instance cannot supply; ``bank.load`` still builds and uses such a kernel.

The verifier binds every passing candidate this way to an instance of the user's class holding
weights of its own and checks its outputs (``Verdict.binding``); the runtime binds only entries
whose bound form passed.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from forge.core.statuses import BindMode

# Names every nn.Module keeps in its __dict__ (hooks, flags, the state dicts): not a kernel's own.
_MODULE_INTERNALS = frozenset(torch.nn.Module().__dict__) | {"_forge_config"}
_CLASS_BOILERPLATE = frozenset(
    {
        "__module__",
        "__qualname__",
        "__doc__",
        "__init__",
        "forward",
        "__annotations__",
        "__firstlineno__",
        "__static_attributes__",
        "__dict__",
        "__weakref__",
    }
)
_PLAIN = (bool, int, float, str, type(None))


class BindRefused(Exception):
    """This kernel cannot run on this instance exactly; the message says why (for the user)."""


@dataclass(frozen=True)
class BindPlan:
    """How a kernel class binds, decided once per kernel from one instance of it (``sample``)."""

    mode: BindMode
    reason: str
    constants: tuple[tuple[str, Any], ...] = ()  # the kernel's own attributes a view carries


def _own_class_names(kernel_cls: type, ref_cls: type) -> list[str]:
    """Methods and class attributes the kernel's classes define beyond ``__init__``/``forward``."""
    names: list[str] = []
    for klass in kernel_cls.__mro__:
        if klass is ref_cls or klass is torch.nn.Module or klass is object or issubclass(ref_cls, klass):
            continue
        names += [n for n in vars(klass) if n not in _CLASS_BOILERPLATE]
    return names


def _uses_zero_arg_super(kernel_cls: type) -> bool:
    """``super()`` without arguments needs ``self`` to be an instance of the kernel's class."""
    forward = getattr(kernel_cls, "forward", None)
    code = getattr(forward, "__code__", None)
    return code is not None and "__class__" in code.co_freevars


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor | torch.nn.Module):
        return True
    if isinstance(value, list | tuple | set | frozenset):
        return any(_holds_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_tensor(v) for v in value.values())
    return False


def _has_name(module: torch.nn.Module, name: str) -> bool:
    return (
        name in module.__dict__
        or name in module._parameters
        or name in module._buffers
        or name in module._modules
        or hasattr(type(module), name)
    )


def plan_binding(kernel_cls: type, ref_cls: type, sample: torch.nn.Module, like: torch.nn.Module) -> BindPlan:
    """How ``kernel_cls`` binds to instances of ``ref_cls``; ``sample`` is a kernel built with the
    verified constructor arguments, ``like`` a reference instance built with the same arguments."""
    extra_state = [
        f"{kind} {name!r}"
        for kind, table in (("parameter", "_parameters"), ("buffer", "_buffers"), ("submodule", "_modules"))
        for name in getattr(sample, table)
        if name not in getattr(like, table)
    ]
    own = {n: v for n, v in sample.__dict__.items() if n not in _MODULE_INTERNALS and not _has_name(like, n)}
    extra_state += [f"attribute {n!r} (holds tensors)" for n, v in own.items() if _holds_tensor(v)]
    if extra_state:
        return BindPlan(
            BindMode.NONE,
            f"the kernel keeps state the reference {ref_cls.__name__} lacks ({', '.join(extra_state[:3])}); "
            "an existing instance cannot supply it (bank.load builds and uses the kernel)",
        )
    methods = _own_class_names(kernel_cls, ref_cls)
    if not own and not methods and not _uses_zero_arg_super(kernel_cls):
        return BindPlan(BindMode.DIRECT, f"its forward runs on the {ref_cls.__name__} instance itself")
    carried = ", ".join([*own, *methods][:4])
    return BindPlan(
        BindMode.VIEW,
        f"its forward runs on a view of the instance carrying the kernel's own {carried}",
        tuple(own.items()),
    )


def config_signature(module: torch.nn.Module) -> dict[str, Any]:
    """What a constructor leaves on a module that a kernel's constants may depend on: state shapes,
    plain attributes, and the classes of its children (an activation module holds no state, yet
    another one computes something else); devices and dtypes are the dispatcher's business."""
    sig: dict[str, Any] = {f"state:{k}": tuple(v.shape) for k, v in module.state_dict().items()}
    sig.update({f"module:{k}": f"{type(v).__module__}.{type(v).__qualname__}" for k, v in module.named_children()})
    for name, value in module.__dict__.items():
        if name.startswith("_") or name == "training":
            continue
        if isinstance(value, _PLAIN) or (isinstance(value, tuple | list) and all(isinstance(v, _PLAIN) for v in value)):
            sig[f"attr:{name}"] = tuple(value) if isinstance(value, list) else value
    return sig


def config_text(module: torch.nn.Module) -> str:
    """``config_signature`` as text: what the bank records of an instance a kernel was verified on,
    compared with the instance ``kernelize`` finds at that path."""
    return json.dumps(config_signature(module), sort_keys=True, default=str)


def state_text(module: torch.nn.Module) -> str:
    """The shapes and dtypes of the module's parameters and buffers, as text: instances whose
    state differs here cannot share one kernel (its loads and sizes are the state's)."""
    state = {k: [list(v.shape), str(v.dtype).removeprefix("torch.")] for k, v in module.state_dict().items()}
    return json.dumps(state, sort_keys=True)


def config_difference(instance: torch.nn.Module, like: torch.nn.Module) -> str | None:
    """The first way ``instance`` is configured unlike ``like`` (None when alike)."""
    return signature_difference(config_signature(instance), config_signature(like))


def signature_difference(
    mine: dict[str, Any], theirs: dict[str, Any], here: str = "here", there: str = "where the kernel was verified"
) -> str | None:
    """The first key on which two ``config_signature``s differ, said for the user (None: alike)."""
    for key in sorted(mine.keys() | theirs.keys()):
        if mine.get(key) != theirs.get(key):
            what = key.split(":", 1)[1]
            return f"{what} is {mine.get(key)!r} {here}, {theirs.get(key)!r} {there}"
    return None


def _view_class(kernel_cls: type) -> type:
    cached = _VIEW_CLASSES.get(kernel_cls)
    if cached is not None:
        return cached

    def __getattr__(self: Any, name: str) -> Any:  # only names the view lacks get here
        return getattr(object.__getattribute__(self, "_forge_instance")(), name)

    def __setattr__(self: Any, name: str, value: Any) -> None:  # a forward's own writes stay on the view
        object.__setattr__(self, name, value)

    view = type(f"{kernel_cls.__name__}View", (kernel_cls,), {"__getattr__": __getattr__, "__setattr__": __setattr__})
    _VIEW_CLASSES[kernel_cls] = view
    return view


_VIEW_CLASSES: weakref.WeakKeyDictionary[type, type] = weakref.WeakKeyDictionary()


def bound_forward(
    kernel_cls: type, plan: BindPlan, instance: torch.nn.Module, like: torch.nn.Module | None = None
) -> Callable[..., Any]:
    """The function to call as ``fn(instance, *args)`` to run the kernel on ``instance``; raises
    BindRefused when it cannot be exact there. ``like``: a reference built with the verified
    constructor arguments (compared with ``instance`` when the kernel carries constants)."""
    if plan.mode is BindMode.NONE:
        raise BindRefused(plan.reason)
    forward: Callable[..., Any] = kernel_cls.forward  # type: ignore[attr-defined]
    if plan.mode is BindMode.DIRECT:
        return forward
    if plan.constants and like is not None:
        differs = config_difference(instance, like)
        if differs is not None:
            raise BindRefused(f"this instance is configured unlike the verified one ({differs})")
    view: Any = object.__new__(_view_class(kernel_cls))
    # The view holds the instance weakly: the instance holds the view (through its patched
    # forward), and a strong reference back would keep a dropped model alive.
    object.__setattr__(view, "_forge_instance", weakref.ref(instance))
    for name, value in plan.constants:
        object.__setattr__(view, name, value)

    def on_view(_instance: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        return forward(view, *args, **kwargs)

    return on_view
