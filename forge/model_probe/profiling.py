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
from pathlib import Path
from typing import Any

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from forge.core.instance_binding import config_text, state_text
from forge.core.model_records import CallUse, ClassUse, InitCall, InstanceUse, ModelProfile, TensorUse
from forge.core.module_call import CallRefused, CallTemplate, call_template, layout_refusal, output_layout
from forge.core.problem import forward_error
from forge.model_probe.source import InitRecorder, LoadedModel
from forge.verifier.briefing.brief_worker import eager_profile
from forge.verifier.worker.call_profile import LIBRARY_OP, call_ms, device_sync

_TIMED_FORWARDS = 10  # unhooked forwards timed for the model's own figure
_HOOKED_FORWARDS = 3  # forwards timed per instance (their median)
_RANGE = "forge_module::"
_CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)


_KEPT_BYTES = 64 << 20  # a call's tensor larger than this is drawn anew, never kept
_COPIES_BYTES = 1 << 30  # all the copies the profile holds, on the CPU


def _tensor_use(x: torch.Tensor) -> TensorUse:
    if x.dtype.is_floating_point or x.dtype.is_complex or x.numel() == 0:
        return TensorUse(shape=list(x.shape), dtype=str(x.dtype).removeprefix("torch."))
    return TensorUse(
        shape=list(x.shape), dtype=str(x.dtype).removeprefix("torch."), low=int(x.min()), high=int(x.max())
    )


@dataclass
class _Signature:
    """One way an instance was called, and the values of its tensors on the first draw."""

    use: CallUse
    first: list[torch.Tensor | None]  # copies (None: too large to keep)
    kept: dict[int, torch.Tensor] = field(default_factory=dict)  # fixed: the same on the second draw


@dataclass
class _Seen:
    """One instance's calls during the hooked forwards."""

    calls: int = 0
    seconds: list[float] = field(default_factory=list)  # per hooked forward
    signatures: dict[str, _Signature] = field(default_factory=dict)
    refusal: str | None = None
    output: str | None = None  # the layout it returns


def _signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, CallTemplate] | str:
    """The call's key and template, or why it cannot be an op's call."""
    try:
        template = call_template(args, kwargs)
    except CallRefused as exc:
        return str(exc)
    shapes = [(tuple(t.shape), t.dtype) for t in template.tensors]
    return f"{template.source} {shapes}", template


def _fixed_marked(sig: _Signature) -> CallUse:
    """The signature's call with the tensors that kept their values across draws marked fixed;
    at least one tensor (the first floating one) is drawn anew, so that every case is fresh."""
    tensors = [u.model_copy(update={"fixed": i in sig.kept}) for i, u in enumerate(sig.use.tensors)]
    if tensors and all(u.fixed for u in tensors):
        first = next((i for i, u in enumerate(tensors) if u.low is None and u.dtype != "bool"), 0)
        tensors[first] = tensors[first].model_copy(update={"fixed": False})
        sig.kept.pop(first, None)
    return CallUse(call=sig.use.call, tensors=tensors)


class _Hooks:
    """Forward hooks on every module: per-call time, calls, and (optionally) profiler ranges; on a
    second draw of the model's inputs, which of each call's tensors kept their values."""

    def __init__(self, model: torch.nn.Module, device: str) -> None:
        self.sync = device_sync(device)
        self.seen: dict[str, _Seen] = {path: _Seen() for path, _ in model.named_modules()}
        self.ranges = False
        self.second_draw = False
        self._copied = 0  # bytes held in copies of the calls' tensors
        self._copies: dict[tuple[Any, ...], torch.Tensor] = {}
        self._open: dict[int, list[tuple[float, Any]]] = defaultdict(list)
        self._handles = []
        for path, sub in model.named_modules():
            self._handles.append(sub.register_forward_pre_hook(self._pre(path), with_kwargs=True))
            self._handles.append(sub.register_forward_hook(self._post(path), with_kwargs=True))

    def _record(self, seen: _Seen, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        found = _signature(args, kwargs)
        if isinstance(found, str):
            seen.refusal = seen.refusal or found
            return
        key, template = found
        held = seen.signatures.get(key)
        if self.second_draw:
            for i, t in enumerate(template.tensors):
                before = held.first[i] if held is not None else None
                if held is not None and before is not None and torch.equal(before, t.detach().cpu()):
                    held.kept[i] = before  # the same values: the first draw's copy (shared, not copied again)
            return
        if held is None:
            first = [self._copy(t) for t in template.tensors]
            use = CallUse(call=template.source, tensors=[_tensor_use(t) for t in template.tensors])
            seen.signatures[key] = _Signature(use, first)

    def _copy(self, t: torch.Tensor) -> torch.Tensor | None:
        """A CPU copy of ``t``, one per tensor however many modules it is passed to (a mask given
        to every layer), within a budget (None past it: the tensor is drawn anew)."""
        key = (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t.device)
        if key not in self._copies:
            size = t.numel() * t.element_size()
            if size > _KEPT_BYTES or self._copied + size > _COPIES_BYTES:
                return None
            self._copied += size
            self._copies[key] = t.detach().cpu().clone()
        return self._copies[key]

    def _pre(self, path: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            self._record(self.seen[path], args, kwargs)
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
            if self.second_draw:
                return
            seen.calls += 1
            seen.seconds[-1] += time.perf_counter() - start
            if scope is not None:
                scope.__exit__(None, None, None)
            seen.output = seen.output or output_layout(output)
            why = layout_refusal(output)
            if why is not None:
                seen.refusal = seen.refusal or why

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


def _instances(
    model: torch.nn.Module, hooks: _Hooks, recorder: InitRecorder
) -> tuple[dict[tuple[str, str], list[tuple[torch.nn.Module, InstanceUse]]], dict[str, list[dict[int, torch.Tensor]]]]:
    """Each class's instances as they ran, and per instance path the values of its calls' fixed
    tensors (per signature)."""
    classes: dict[tuple[str, str], list[tuple[torch.nn.Module, InstanceUse]]] = defaultdict(list)
    kept: dict[str, list[dict[int, torch.Tensor]]] = {}
    for path, sub in model.named_modules():  # the model itself included (path ""): optimized whole as a fallback
        seen = hooks.seen[path]
        if seen.calls == 0:
            continue
        signatures = [_fixed_marked(sig) for sig in seen.signatures.values()]
        kept[path] = [sig.kept for sig in seen.signatures.values()]
        use = InstanceUse(
            path=path,
            calls=seen.calls // (_HOOKED_FORWARDS + 1),
            inclusive_ms=round(statistics.median(seen.seconds[:_HOOKED_FORWARDS]) * 1e3, 5),
            signatures=signatures,
            init=recorder.of(sub) or InitCall(refusal="it was not built while forge built the model"),
            config=config_text(sub),
            state=state_text(sub),
            refusal=seen.refusal,
        )
        classes[_class_key(type(sub))].append((sub, use))
    return classes, kept


def _other_draw(loaded: LoadedModel, inputs: list[Any], device: str) -> list[Any]:
    """A second draw of the model's inputs: what changes with it in a layer's call is drawn anew
    for the layer's op, what does not is the model's own (a mask, rotary tables). Where the
    model's ``get_inputs()`` gives the same values every time (a fixed batch, a seeded generator of
    its own), they are moved here: floats redrawn, integers redrawn in their range."""
    torch.manual_seed(1)
    other = [x.to(device) if isinstance(x, torch.Tensor) else x for x in loaded.inputs()]
    tensors = [(a, b) for a, b in zip(inputs, other, strict=False) if isinstance(a, torch.Tensor)]
    if tensors and all(isinstance(b, torch.Tensor) and torch.equal(a, b) for a, b in tensors):
        other = [_redrawn(x) if isinstance(x, torch.Tensor) else x for x in inputs]
    return other


def _redrawn(x: torch.Tensor) -> torch.Tensor:
    if x.is_floating_point():
        return torch.randn_like(x) * (x.std() if x.numel() > 1 else 1.0) + x.mean()
    if x.dtype == torch.bool or x.numel() == 0:
        return x
    return torch.randint_like(x, int(x.min()), int(x.max()) + 1)


def _measure(model: torch.nn.Module, loaded: LoadedModel, device: str) -> tuple[float, _Hooks, Any, Any]:
    """The forward's time, the hooks' records (a second draw of the inputs included), the profiler's
    events and eager's top aten ops."""
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in loaded.inputs()]
    sync = device_sync(device)

    def run() -> Any:
        return model(*inputs)

    with torch.no_grad():
        try:
            run()  # the first call: where a model that fails on its own inputs says so, as the user's mistake
        except Exception as exc:
            raise forward_error(Path(loaded.model_file or loaded.module.__file__ or loaded.spec), exc) from exc
        run()  # warm-up: allocator, lazy init, thread pools
        forward_ms = statistics.median(call_ms(run, sync) for _ in range(_TIMED_FORWARDS))
        hooks = _Hooks(model, device)
        for _ in range(_HOOKED_FORWARDS):
            hooks.forward(run)
        hooks.ranges = True
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        with profile(activities=activities) as prof:
            hooks.forward(run)
        hooks.ranges, hooks.second_draw = False, True
        model(*_other_draw(loaded, inputs, device))
        hooks.remove()
        aten = eager_profile(run, device, forward_ms).ops
    return forward_ms, hooks, prof.events(), aten


def profile_model(loaded: LoadedModel, device: str, recorded: Path | None = None) -> ModelProfile:
    """Build the model (recording constructor arguments), run it, and measure where its time goes;
    ``recorded``: where to save the values of the calls' fixed tensors (``torch.save``, per
    instance path a list per signature of {tensor index: value})."""
    recorder = InitRecorder()
    torch.manual_seed(0)
    model = recorder.build(loaded.build).eval().to(device)
    forward_ms, hooks, events, aten = _measure(model, loaded, device)
    library = _library_seconds(events, device)
    root_ms = statistics.median(hooks.seen[""].seconds[:_HOOKED_FORWARDS]) * 1e3 or 1e-9
    classes, kept = _instances(model, hooks, recorder)
    if recorded is not None:
        torch.save(
            {path: [{i: t.cpu() for i, t in sig.items()} for sig in sigs] for path, sigs in kept.items()}, recorded
        )
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
