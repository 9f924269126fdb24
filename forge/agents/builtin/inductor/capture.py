"""Inductor's code for an op, captured so that a candidate can run it without torch.compile.

The op's reference is compiled once, in the process that calls ``capture`` (the coder's own, or
a child of it: ``capture_apart``) (``fullgraph=True``, static
shapes, no gradients), through a backend that records which tensor each of the graph's inputs
is: a parameter, buffer or plain tensor attribute of the module (by its path), or one of the
op's inputs. Inductor's output module (its generated kernels and the ``call(args)`` that runs
them and the library routines between them) is kept as text, its benchmark harness cut off.
Before the capture is handed on, the code runs once in a fresh namespace, on the arguments in
the order recorded, and its outputs are compared with the reference's: a capture that does not
reproduce the op (an output aliasing an input, a second graph) is refused with the reason."""

from __future__ import annotations

import threading
import types
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch

from forge.core.module_call import output_tensors

# Inductor's output module ends with code that benchmarks it stand-alone: not part of the op
_HARNESS_STARTS = ("\ndef get_args(", "\ndef benchmark_compiled_module(", '\nif __name__ == "__main__":')


class InductorRefused(Exception):
    """Inductor's code cannot be captured as a candidate for this op (the message says why)."""


@dataclass(frozen=True)
class StateArg:
    """A tensor the module holds, by its path, and where its owner keeps it: ``table`` is
    ``_parameters`` or ``_buffers``, or "" for a plain tensor attribute."""

    path: str
    table: str = ""


@dataclass(frozen=True)
class InputArg:
    """The op's input ``index`` (``get_inputs()``'s order)."""

    index: int


ArgSource = StateArg | InputArg


@dataclass(frozen=True)
class OpCall:
    """How the op is called and what it returns."""

    call: str | None  # its forge_call's argument list (None: the inputs in order)
    layout: str  # the structure of its output (``module_call.output_layout``)


@dataclass(frozen=True)
class TensorSpec:
    """What a compiled-for tensor was: the code asserts sizes and strides of every argument."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str

    @classmethod
    def of(cls, t: torch.Tensor) -> TensorSpec:
        return cls(tuple(t.shape), tuple(t.stride()), str(t.dtype))


@dataclass(frozen=True)
class Captured:
    """Inductor's code for one op and how to call it."""

    code: str  # the output module, harness cut off
    args: tuple[ArgSource, ...]  # what ``call(args)`` takes, in order
    # per output of the op (``output_tensors`` order): None for the next of ``call``'s outputs,
    # an index for an input the op returns as it was given
    outputs: tuple[int | None, ...]
    inputs: tuple[TensorSpec, ...]  # the op's inputs, as compiled for
    state: tuple[tuple[StateArg, TensorSpec], ...]  # the module's tensors the code reads
    device: str  # the device it was compiled for, with its index (the code names it)


def _source_function(name: str, n_inputs: int, body: str, scope: dict[str, Any]) -> Any:
    names = ", ".join(f"x{i}" for i in range(n_inputs))
    exec(compile(f"def {name}({names}):\n{body}", f"<forge: {name}>", "exec"), scope)
    return scope[name]


def _arguments(n_inputs: int, template: str | None) -> str:
    return template if template is not None else ", ".join(f"x{i}" for i in range(n_inputs))


def op_function(model: torch.nn.Module, n_inputs: int, template: str | None, keep: Sequence[int]) -> Any:
    """``f(x0, ..., xn)``: the op called as it is called (``template``: a forge_call's argument
    list, else the inputs in order), returning the outputs at ``keep`` (``output_tensors``'s
    places) as a tuple. Written as source, so that the compiler sees a plain call."""
    body = (
        f"    _flat = _output_tensors(_model({_arguments(n_inputs, template)}))\n"
        f"    return tuple(_flat[k] for k in {tuple(keep)!r})\n"
    )
    scope: dict[str, Any] = {"torch": torch, "_model": model, "_output_tensors": output_tensors}
    return _source_function("_forge_op", n_inputs, body, scope)


def call_op(model: torch.nn.Module, inputs: Sequence[torch.Tensor], template: str | None) -> Any:
    """The op's output (its structure kept) on ``inputs``, called as ``template`` says."""
    body = f"    return _model({_arguments(len(inputs), template)})\n"
    return _source_function("_forge_call", len(inputs), body, {"torch": torch, "_model": model})(*inputs)


def state_paths(model: torch.nn.Module) -> dict[int, StateArg]:
    """Every tensor the module holds, by identity: parameters, buffers, plain tensor attributes."""
    paths: dict[int, StateArg] = {}
    for prefix, module in model.named_modules(remove_duplicate=False):
        dotted = f"{prefix}." if prefix else ""
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor):
                paths.setdefault(id(value), StateArg(dotted + name))
        for table in ("_parameters", "_buffers"):
            for name, value in getattr(module, table, {}).items():
                if value is not None:
                    paths.setdefault(id(value), StateArg(dotted + name, table))
    return paths


def trimmed(code: str) -> str:
    """The output module without its stand-alone benchmark."""
    cut = min((i for i in (code.find(s) for s in _HARNESS_STARTS) if i >= 0), default=len(code))
    return code[:cut].rstrip() + "\n"


def _sources(
    example_inputs: Sequence[Any], model: torch.nn.Module, inputs: Sequence[torch.Tensor]
) -> tuple[ArgSource, ...]:
    """What each of the compiled graph's arguments is, found by identity."""
    held = state_paths(model)
    given = {id(t): i for i, t in reversed(list(enumerate(inputs)))}
    out: list[ArgSource] = []
    for k, value in enumerate(example_inputs):
        if not isinstance(value, torch.Tensor):
            raise InductorRefused(f"the compiled graph takes a {type(value).__name__} as its argument {k}")
        if id(value) in given:
            out.append(InputArg(given[id(value)]))
        elif id(value) in held:
            out.append(held[id(value)])
        else:
            raise InductorRefused(f"the compiled graph's argument {k} is a tensor the module does not hold")
    return tuple(out)


def _aliases(flat: Sequence[Any], inputs: Sequence[torch.Tensor]) -> tuple[int | None, ...]:
    """Per output: the input it is (returned as given), else None; an output that is a view of an
    input (or not a tensor) is refused: the compiled graph does not return it."""
    found: list[int | None] = []
    for k, out in enumerate(flat):
        if not isinstance(out, torch.Tensor):
            raise InductorRefused(f"output {k} is a {type(out).__name__}, not a tensor")
        same = [i for i, x in enumerate(inputs) if out is x]
        if same:
            found.append(same[0])
        elif any(out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() for x in inputs):
            raise InductorRefused(f"output {k} is a view of one of the op's inputs")
        else:
            found.append(None)
    return tuple(found)


def run_code(code: str, name: str = "forge_inductor_code") -> types.ModuleType:
    """Inductor's output module run in a namespace of its own (its kernels built, from the cache
    when built before)."""
    module = types.ModuleType(name)
    exec(compile(code, f"<forge: {name}>", "exec"), module.__dict__)
    return module


# Dynamo and Inductor state is process-wide: one capture at a time (a Ray run's sessions are
# threads of one driver)
_CAPTURE_LOCK = threading.Lock()
# What the capture relies on, whatever the environment sets: weights not folded into the code, a
# Python wrapper (its ``call`` is what runs). Parameters are graph arguments (found by identity):
# dynamo inlines nn.Modules, as it always does from torch 2.6
_PINNED_INDUCTOR = {"fx_graph_cache": False, "freezing": False, "cpp_wrapper": False}


def _compiled_code(fn: Any, inputs: Sequence[torch.Tensor], backend: Any, options: dict[str, Any]) -> list[str]:
    """Inductor's output modules for ``fn`` on ``inputs``, compiled whole through ``backend``."""
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    try:
        with inductor_config.patch({**options, **_PINNED_INDUCTOR}), torch.no_grad():
            compiled = torch.compile(fn, backend=backend, fullgraph=True, dynamic=False)
            _, codes = run_and_get_code(lambda: compiled(*inputs))
    except Exception as exc:  # dynamo and Inductor raise many kinds; each is a reason to refuse
        inner = getattr(exc, "inner_exception", None) or exc  # what the backend raised, unwrapped
        if isinstance(inner, InductorRefused):
            raise inner from None
        text = str(inner).strip()
        first = text.splitlines()[0] if text else type(inner).__name__
        raise InductorRefused(f"torch.compile could not compile it whole: {first[:300]}") from None
    finally:
        torch._dynamo.reset()
    return list(codes)


def capture(
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    template: str | None,
    options: dict[str, Any] | None = None,
    training: bool = False,
) -> Captured:
    """Inductor's code for ``model`` called on ``inputs`` (as ``template`` says) in eval mode
    (``training``: in training mode), compiled with the Inductor ``options``; raises
    InductorRefused. The module's buffers are left as found."""
    from torch._inductor.compile_fx import compile_fx

    if len({id(x) for x in inputs}) != len(inputs):
        raise InductorRefused("one tensor is passed as two of the op's inputs: the compiled code would take it once")
    model = model.train(training)
    state = _buffers(model)
    with torch.no_grad():
        flat = output_tensors(call_op(model, inputs, template))
    after = _buffers(model)  # what a call leaves in the buffers (BatchNorm's running statistics)
    _restore(model, state)
    aliases = _aliases(flat, inputs)
    keep = [k for k, a in enumerate(aliases) if a is None]
    if not keep:
        raise InductorRefused("the op computes nothing: every output is one of its inputs")
    seen: list[tuple[ArgSource, ...]] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        seen.append(_sources(example_inputs, model, inputs))
        return compile_fx(gm, example_inputs)

    with _CAPTURE_LOCK:
        codes = _compiled_code(op_function(model, len(inputs), template, keep), inputs, backend, options or {})
    if len(seen) != 1 or len(codes) != 1:
        raise InductorRefused(f"torch.compile made {len(codes)} modules of code for it, not one")
    captured = Captured(
        code=trimmed(codes[0]),
        args=seen[0],
        outputs=aliases,
        inputs=tuple(TensorSpec.of(x) for x in inputs),
        state=_state(model, seen[0]),
        device=str(inputs[0].device),
    )
    _restore(model, state)
    try:
        _check(captured, model, inputs, [flat[k] for k in keep], after)
    finally:
        _restore(model, state)
    return captured


class TrainMode(Enum):
    """What the op is in training mode, next to eval mode."""

    SAME = "same"  # the same op: eval mode's code serves both
    RANDOM = "random"  # random (dropout): the reference runs in training mode, as for every kernel
    OTHER = "other"  # another op (BatchNorm's batch statistics): code of its own


def _buffers(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: b.detach().clone() for name, b in model.named_buffers()}


def _restore(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, b in model.named_buffers():
            if name in state:
                b.copy_(state[name])


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape and torch.equal(x, y)
        for x, y in zip(a, b, strict=True)
    )


def train_mode(model: torch.nn.Module, inputs: Sequence[torch.Tensor], template: str | None) -> TrainMode:
    """Two training-mode calls from the same state that differ are random; a training-mode call
    whose outputs or buffers differ from eval mode's is another op (``model`` is left as found)."""
    state = _buffers(model)
    was_training = model.training
    try:
        with torch.no_grad():
            first = output_tensors(call_op(model.train(), inputs, template))
            moved = _buffers(model)
            _restore(model, state)
            second = output_tensors(call_op(model, inputs, template))
            _restore(model, state)
            evaluated = output_tensors(call_op(model.eval(), inputs, template))
    finally:
        _restore(model, state)
        model.train(was_training)
    if not _same(first, second):
        return TrainMode.RANDOM
    buffers_same = all(torch.equal(moved[k], state[k]) for k in state)
    return TrainMode.SAME if buffers_same and _same(first, evaluated) else TrainMode.OTHER


def attribute(model: torch.nn.Module, path: str) -> Any:
    obj: Any = model
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _state(model: torch.nn.Module, args: tuple[ArgSource, ...]) -> tuple[tuple[StateArg, TensorSpec], ...]:
    return tuple((a, TensorSpec.of(attribute(model, a.path))) for a in args if isinstance(a, StateArg))


def _check(
    captured: Captured,
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    expected: list[Any],
    after: dict[str, torch.Tensor],
) -> None:
    """The captured code, run as a candidate will run it, gives the reference's outputs and
    leaves the module's buffers as the reference's call does (``after``)."""
    try:
        module = run_code(captured.code)
    except Exception as exc:  # a kernel that does not build here
        raise InductorRefused(f"Inductor's code does not run on its own: {type(exc).__name__}: {exc}") from None
    args = [inputs[a.index] if isinstance(a, InputArg) else attribute(model, a.path) for a in captured.args]
    try:
        with torch.no_grad():
            got = module.call(list(args))
    except Exception as exc:
        raise InductorRefused(f"Inductor's code raised when run on its own: {type(exc).__name__}: {exc}") from None
    got = list(got) if isinstance(got, list | tuple) else [got]
    if len(got) != len(expected):
        raise InductorRefused(f"Inductor's code returns {len(got)} tensors where the op computes {len(expected)}")
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        if not isinstance(g, torch.Tensor) or g.shape != e.shape or g.dtype != e.dtype:
            raise InductorRefused(f"Inductor's output {k} is not the op's (shape or dtype)")
        if not torch.allclose(g.float(), e.float(), rtol=1e-2, atol=1e-2, equal_nan=True):
            raise InductorRefused(f"Inductor's output {k} differs from the reference's when run on its own")
    for name, b in model.named_buffers():
        if name in after and not torch.allclose(b.float(), after[name].float(), rtol=1e-3, atol=1e-4, equal_nan=True):
            raise InductorRefused(f"Inductor's code leaves the buffer {name} other than the reference's call does")
