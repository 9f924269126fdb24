"""The per-instance dispatcher: a patched instance's ``forward`` picks its kernel and calls it, and the
torch.library op that call goes through under ``torch.compile``.

Kernels are verified for inference: when autograd would need gradients (grad mode on and an
input or parameter requiring grad) the reference runs, so training is never silently broken; so
it does in training mode for a kernel verified in eval mode alone (an op random in training mode,
dropout).
Otherwise a patched instance's ``forward`` looks up the kernel verified for the inputs' device kind
and dtype, sets the nearest shape bucket's config (``self._forge_config``) and calls the kernel,
falling back to the reference forward on any failure. Under ``torch.compile`` the same call goes
through the custom op ``forge_bank::call``, whose fake implementation runs the *reference* on
meta tensors to learn the output shapes, so graphs stay whole (``fullgraph=True``) even when the
kernel itself (ctypes, Triton launches) is opaque to the compiler. Static shapes only.
"""

from __future__ import annotations

import copy
import itertools
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from forge.bank_schema import KernelEntry
from forge.core.errors import KernelUnavailableError
from forge.kernelbank import loader, usage
from forge.kernelbank.shape_buckets import nearest_config

_handles: dict[int, _Handle] = {}
_ids = itertools.count(1)


class _Handle:
    """One (instance, kernel) binding, addressable by an int from inside the custom op."""

    def __init__(
        self,
        instance: torch.nn.Module,
        entry: KernelEntry,
        kernel_forward: Callable[..., Any],
        fallback: Callable[..., Any],
        strict: bool,
    ) -> None:
        self.id = next(_ids)
        self.entry = entry
        self.kernel_forward = kernel_forward  # called as kernel_forward(instance, *args)
        self.fallback = fallback
        self.strict = strict
        self._instance = weakref.ref(instance)
        self._meta: torch.nn.Module | None = None
        self.single = True
        self.multi_config = len(entry.configs) > 1
        self.eval_only = entry.eval_only
        if len(entry.configs) == 1:  # one bucket: its config is set once, not per call
            instance.__dict__["_forge_config"] = entry.configs[0][1]
        _handles[self.id] = self
        weakref.finalize(instance, _handles.pop, self.id, None)

    @property
    def instance(self) -> torch.nn.Module:
        inst = self._instance()
        if inst is None:
            raise RuntimeError("the module this kernel was bound to no longer exists")
        return inst

    def run(self, *args: Any, **kwargs: Any) -> Any:
        inst = self.instance
        if self.multi_config:
            shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
            inst.__dict__["_forge_config"] = nearest_config(self.entry.configs, shapes) or {}
        return self.call(inst, *args, **kwargs)

    def call(self, inst: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        if self.entry.key in loader.bad_kernels:
            return self.fallback(inst, *args, **kwargs)
        try:
            return self.kernel_forward(inst, *args, **kwargs)
        except Exception as exc:
            if self.strict:
                raise
            loader.mark_bad(self.entry, f"it raised {type(exc).__name__}: {exc}")
            return self.fallback(inst, *args, **kwargs)

    def meta_outputs(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Output shapes and dtypes from the reference run on meta tensors (outside any fake mode)."""
        with _disable_current_modes():
            if self._meta is None:
                meta = copy.copy(self.instance)
                meta.__dict__ = {k: v for k, v in meta.__dict__.items() if k != "forward"}
                self._meta = copy.deepcopy(meta).to("meta")
            args = [torch.empty(tuple(int(s) for s in x.shape), dtype=x.dtype, device="meta") for x in inputs]
            out = self.fallback(self._meta, *args)
        outs = list(out) if isinstance(out, tuple | list) else [out]
        self.single = not isinstance(out, tuple | list)
        return outs


@torch.library.custom_op("forge_bank::call", mutates_args=())
def _call(handle: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    out = _handles[handle].run(*inputs)
    outs = list(out) if isinstance(out, tuple | list) else [out]
    # A custom op's outputs must be fresh tensors; verified kernels never alias inputs, the
    # reference fallback might (e.g. an identity op), so copy only in that case.
    ins = {x.untyped_storage().data_ptr() for x in inputs}
    return [o.clone() if o.untyped_storage().data_ptr() in ins else o for o in outs]


@_call.register_fake
def _(handle: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    device = inputs[0].device if inputs else torch.device("cpu")
    return [torch.empty(o.shape, dtype=o.dtype, device=device) for o in _handles[handle].meta_outputs(inputs)]


def _needs_grad(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if any(isinstance(a, torch.Tensor) and a.requires_grad for a in (*args, *kwargs.values())):
        return True
    return any(p.requires_grad for p in module.parameters())


def first_tensor(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a
    return None


def kernel_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, torch.dtype] | None:
    """What a call's kernel is picked by, as the bank files a kernel (``db.kernels``): the device
    kind of its first tensor and the dtype of its first floating-point one, float32 where none is
    (token ids into an embedding, a whole language model); None without a tensor."""
    x = first_tensor(args, kwargs)
    if x is None:
        return None
    kind = "cuda" if x.is_cuda else "cpu" if x.is_cpu else x.device.type
    if x.is_floating_point():
        return kind, x.dtype
    floating = next(
        (a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) and a.is_floating_point()), None
    )
    return kind, floating.dtype if floating is not None else torch.float32


def make_forward(
    instance: torch.nn.Module,
    name: str,
    table: dict[tuple[str, torch.dtype], tuple[KernelEntry, Callable[..., Any]]],
    fallback: Callable[..., Any],
    strict: bool,
    compiled: dict[tuple[str, torch.dtype], tuple[KernelEntry, Callable[..., Any]]] | None = None,
) -> Callable[..., Any]:
    """The forward to set on ``instance``: its kernels by (device kind, dtype), else the reference.
    ``table`` holds each kernel's forward as called on this instance (``fn(instance, *args)``);
    ``compiled``, those used while torch.compile traces it (None: the same), the others leaving
    the reference to Inductor."""

    def noted(*args: Any, **kwargs: Any) -> Any:  # the reference, seen by a watch
        if usage.ACTIVE is not None:
            usage.ACTIVE.reference_ran()
        return fallback(*args, **kwargs)

    handles = {key: _Handle(instance, entry, fn, noted, strict) for key, (entry, fn) in table.items()}
    traced = handles
    if compiled is not None:
        same = {key: h for key, h in handles.items() if key in compiled and compiled[key][0] is h.entry}
        traced = {key: same.get(key) or _Handle(instance, e, fn, noted, strict) for key, (e, fn) in compiled.items()}
        if len(same) < len(traced):  # two kernels share the instance: each sets its own config per call
            for h in (*handles.values(), *traced.values()):
                h.multi_config = True

    def forward(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        if usage.ACTIVE is not None:  # ``KernelBank.watch``: count this call and any fallback in it
            return usage.ACTIVE.observe(name, dispatch, self, *args, **kwargs)
        return dispatch(self, *args, **kwargs)

    def dispatch(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        # The hot path: a handful of attribute reads and one dict lookup before the kernel.
        x = args[0] if args and isinstance(args[0], torch.Tensor) else first_tensor(args, kwargs)
        handle = None
        if x is not None:
            if x.is_floating_point():  # the usual call: its first tensor says both
                key = ("cuda" if x.is_cuda else "cpu" if x.is_cpu else x.device.type, x.dtype)
            else:
                key = kernel_key(args, kwargs) or ("cpu", torch.float32)
            handle = (traced if torch.compiler.is_compiling() else handles).get(key)
            if handle is None and key in handles:  # not worth it under torch.compile: Inductor compiles the reference
                return fallback(self, *args, **kwargs)
        if handle is None:
            where = f"{x.device.type}/{x.dtype}" if x is not None else "no tensor input"
            if strict:
                raise KernelUnavailableError(f"{name}: no verified kernel for these inputs ({where})")
            if handles:
                loader.warn_once(
                    f"unverified:{name}:{where}",
                    f"forge kernel bank: no kernel for {name!r} was verified for {where}; using the reference",
                )
            return noted(self, *args, **kwargs)
        # Where autograd needs gradients only a kernel whose backward was verified runs, and not
        # under torch.compile (the bank's custom op has no autograd of its own)
        needs_grad = torch.is_grad_enabled() and _needs_grad(self, args, kwargs)  # the cheap test first
        if needs_grad and (not handle.entry.trains or torch.compiler.is_compiling()):
            return noted(self, *args, **kwargs)
        if handle.eval_only and self.training:  # random in training mode (dropout): not verified there
            return noted(self, *args, **kwargs)
        if torch.compiler.is_compiling() and not kwargs and all(isinstance(a, torch.Tensor) for a in args):
            outs = torch.ops.forge_bank.call(handle.id, list(args))
            return outs[0] if handle.single else tuple(outs)
        if handle.multi_config:
            return handle.run(*args, **kwargs)
        return handle.call(self, *args, **kwargs)

    return forward
