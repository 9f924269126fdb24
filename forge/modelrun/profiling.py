"""Profiling a model as it runs (eager, inference, on the inputs it is given): time per module
instance (forward hooks around each call, children included), the input signatures each instance
sees, the share of each class's time inside library producers (the profiler's events under a
range per instance), and eager's top aten ops."""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from forge.core.model_records import ClassUse, InitCall, InstanceUse, ModelProfile, TensorUse
from forge.modelrun.source import InitRecorder, LoadedModel, configuration
from forge.verifier.op_brief_worker import LIBRARY_OP, call_ms, device_sync, eager_profile

_TIMED_FORWARDS = 10  # unhooked forwards timed for the model's own figure
_HOOKED_FORWARDS = 3  # forwards timed per instance (their median)
_RANGE = "forge_module::"
_CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)


def _tensor_use(x: torch.Tensor) -> TensorUse:
    if x.dtype.is_floating_point or x.dtype.is_complex or x.numel() == 0:
        return TensorUse(shape=list(x.shape), dtype=str(x.dtype).removeprefix("torch."))
    return TensorUse(
        shape=list(x.shape), dtype=str(x.dtype).removeprefix("torch."), low=int(x.min()), high=int(x.max())
    )


@dataclass
class _Seen:
    """One instance's calls during the hooked forwards."""

    calls: int = 0
    seconds: list[float] = field(default_factory=list)  # per hooked forward
    signatures: dict[str, list[TensorUse]] = field(default_factory=dict)
    refusal: str | None = None


def _signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[TensorUse] | str:
    """The call's inputs as tensor uses, or why they cannot be an op's inputs."""
    if kwargs:
        return f"it is called with keyword arguments ({', '.join(kwargs)})"
    if not args:
        return "it is called without arguments"
    uses = []
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            return f"its argument {i} is a {type(a).__name__}, not a tensor"
        if a.dtype == torch.bool:
            return f"its argument {i} is a boolean mask (data-dependent)"
        uses.append(_tensor_use(a))
    return uses


class _Hooks:
    """Forward hooks on every module: per-call time, inputs, and (optionally) profiler ranges."""

    def __init__(self, model: torch.nn.Module, device: str) -> None:
        self.sync = device_sync(device)
        self.seen: dict[str, _Seen] = {path: _Seen() for path, _ in model.named_modules()}
        self.ranges = False
        self._open: dict[int, list[tuple[float, Any]]] = defaultdict(list)
        self._handles = []
        for path, sub in model.named_modules():
            self._handles.append(sub.register_forward_pre_hook(self._pre(path), with_kwargs=True))
            self._handles.append(sub.register_forward_hook(self._post(path), with_kwargs=True))

    def _pre(self, path: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            seen = self.seen[path]
            sig = _signature(args, kwargs)
            if isinstance(sig, str):
                seen.refusal = seen.refusal or sig
            else:
                seen.signatures.setdefault(repr([(u.shape, u.dtype) for u in sig]), sig)
            scope = record_function(_RANGE + path) if self.ranges else None
            if scope is not None:
                scope.__enter__()
            self.sync()
            self._open[id(module)].append((time.perf_counter(), scope))

        return hook

    def _post(self, path: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, _args: Any, _kwargs: Any, output: Any) -> None:
            self.sync()
            start, scope = self._open[id(module)].pop()
            seen = self.seen[path]
            seen.calls += 1
            seen.seconds[-1] += time.perf_counter() - start
            if scope is not None:
                scope.__exit__(None, None, None)
            outs = output if isinstance(output, tuple | list) else (output,)
            if not all(isinstance(o, torch.Tensor) for o in outs):
                seen.refusal = seen.refusal or f"it returns a {type(output).__name__}, not tensors"

        return hook

    def forward(self, run: Callable[[], Any]) -> None:
        for seen in self.seen.values():
            seen.seconds.append(0.0)
        run()

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


def _library_seconds(events: Any, device: str) -> dict[str, tuple[float, float]]:
    """Per instance path: (its ranges' total time, the time of library producers under them), in
    the device's clock on CUDA (a range's CPU time there is the hooks' synchronize waits)."""

    def spent(event: Any) -> float:
        return float(event.device_time_total if device == "cuda" else event.cpu_time_total)

    found: dict[str, tuple[float, float]] = {}
    for event in events:
        if not event.name.startswith(_RANGE):
            continue
        library, stack = 0.0, list(event.cpu_children)
        while stack:
            child = stack.pop()
            if not child.name.startswith(_RANGE) and LIBRARY_OP.search(child.name.lower()):
                library += spent(child)
            else:  # a nested instance's range, or an op that calls others
                stack.extend(child.cpu_children)
        total, lib = found.get(event.name[len(_RANGE) :], (0.0, 0.0))
        found[event.name[len(_RANGE) :]] = (total + spent(event), lib + library)
    return found


def _class_key(cls: type) -> tuple[str, str]:
    """Where a class is imported from: torch's modules by their public package (torch.nn)."""
    if cls.__module__.startswith("torch.nn.modules") and getattr(torch.nn, cls.__name__, None) is cls:
        return "torch.nn", cls.__name__
    return cls.__module__, cls.__qualname__


def profile_model(loaded: LoadedModel, device: str) -> ModelProfile:
    """Build the model (recording constructor arguments), run it, and measure where its time goes."""
    recorder = InitRecorder()
    torch.manual_seed(0)
    model = recorder.build(loaded.build).eval().to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in loaded.inputs()]
    sync = device_sync(device)

    def run() -> Any:
        return model(*inputs)

    with torch.no_grad():
        run(), run()  # warm-up: allocator, lazy init, thread pools
        forward_ms = statistics.median(call_ms(run, sync) for _ in range(_TIMED_FORWARDS))
        hooks = _Hooks(model, device)
        for _ in range(_HOOKED_FORWARDS):
            hooks.forward(run)
        hooks.ranges = True
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        with profile(activities=activities) as prof:
            hooks.forward(run)
        hooks.remove()
        library = _library_seconds(prof.events(), device)
        aten = eager_profile(run, device, forward_ms).ops
    root_ms = statistics.median(hooks.seen[""].seconds[:_HOOKED_FORWARDS]) * 1e3 or 1e-9
    classes: dict[tuple[str, str], list[tuple[torch.nn.Module, InstanceUse]]] = defaultdict(list)
    for path, sub in model.named_modules():  # the model itself included (path ""): optimized whole as a fallback
        seen = hooks.seen[path]
        if seen.calls == 0:
            continue
        use = InstanceUse(
            path=path,
            calls=seen.calls // (_HOOKED_FORWARDS + 1),
            inclusive_ms=round(statistics.median(seen.seconds[:_HOOKED_FORWARDS]) * 1e3, 5),
            inputs=list(seen.signatures.values()),
            init=recorder.of(sub) or InitCall(refusal="it was not built while forge built the model"),
            config=configuration(sub),
            refusal=seen.refusal,
        )
        classes[_class_key(type(sub))].append((sub, use))
    uses = []
    for (module, name), members in classes.items():
        total = sum(u.inclusive_ms for _, u in members)
        spent, lib = (sum(library.get(u.path, (0.0, 0.0))[i] for _, u in members) for i in (0, 1))
        uses.append(
            ClassUse(
                module=module,
                name=name,
                torch_builtin=module.startswith("torch"),
                container=isinstance(members[0][0], _CONTAINERS),
                library_share=round(lib / spent, 4) if spent else 0.0,
                share=round(total / root_ms, 4),
                instances=[u for _, u in members],
            )
        )
    uses.sort(key=lambda c: -c.share)
    root_module, root_name = _class_key(type(model))
    return ModelProfile(
        source=loaded.spec,
        import_name=loaded.module.__name__,
        model_file=loaded.model_file,
        root=f"{root_module}:{root_name}",
        device=device,
        forward_ms=round(forward_ms, 5),
        forwards=_TIMED_FORWARDS,
        classes=uses,
        aten=aten,
    )
