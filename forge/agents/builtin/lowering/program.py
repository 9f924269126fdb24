"""The lowering as a kernel family of the built-in coder: a traced reference becomes one C++
library of steps and a Python ``ModelNew`` that runs them.

``analyze`` traces and schedules (``schedule``); ``render`` writes the candidate: every run of
consecutive C++ steps is one exported ``stage<k>`` function over a table of buffer pointers;
library producers run between stages as the same torch calls the reference makes; module buffers
a training-mode reference updates are written back after the last stage. The kernel is built for
the shapes and the training/eval mode it was traced in: called with other shapes, dtypes or
devices, or in the other mode, ``ModelNew`` runs the reference itself rather than read out of
bounds or compute the other mode's op. A reference that draws random numbers (dropout in training
mode) is traced in eval mode, the mode the verifier verifies it in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from forge.agents.builtin.cpp_snippets import HEADER
from forge.agents.builtin.lowering.cpp_emit import pointwise_step
from forge.agents.builtin.lowering.cpp_expr import VECTOR_MATH
from forge.agents.builtin.lowering.cpp_fuse import RowGroup, fused_row_step, row_groups
from forge.agents.builtin.lowering.cpp_kept import arg_step, pool_step, scan_step
from forge.agents.builtin.lowering.cpp_reduce import reduce_step
from forge.agents.builtin.lowering.ir import Unsupported
from forge.agents.builtin.lowering.py_side import (
    allocation,
    closing_lines,
    constant_table,
    library_lines,
    load_lines,
)
from forge.agents.builtin.lowering.schedule import Schedule, Step, schedule
from forge.agents.builtin.lowering.trace import Traced, is_random, packet_name, trace, unloweable
from forge.agents.builtin.pointwise import ERF, FMATH
from forge.agents.builtin.rowwise import ATTR_SOURCE
from forge.agents.builtin.tuner import effective_config


@dataclass(frozen=True)
class LoweredGraph:
    """A traced reference and its schedule (what ``render`` writes a candidate from)."""

    traced: Traced
    sched: Schedule
    out_kind: str  # single | tuple | the torch.return_types record the reference returns
    inputs: tuple[tuple[tuple[int, ...], torch.dtype], ...]  # the op's inputs' shapes and dtypes
    uses_erf: bool = False  # an exact GELU: the erf knob (see pointwise.ERF) applies
    training: bool = True  # the module's mode when traced: the kernel computes that mode's op

    def knobs(self) -> dict[str, list[Any]]:
        kinds = {s.kind for s in self.sched.steps}
        space: dict[str, list[Any]] = {"threads": [0, 1]}
        if kinds & {"reduce", "scan"}:
            space["acc"] = ["double", "float"]
        if "reduce" in kinds:
            space["tile"] = [256, 64, 1024]
        if any(isinstance(u, RowGroup) for u in row_groups(self.sched.steps)):
            space["fuse"] = [True, False]
        if kinds & {"pointwise", "reduce"}:
            space["chunk"] = [4096, 16384]
        if self.uses_erf:
            space["erf"] = list(ERF)
        return space


DEFAULT: dict[str, Any] = {"threads": 0, "acc": "double", "tile": 256, "chunk": 4096, "erf": "torch", "fuse": True}


def analyze(model: torch.nn.Module, inputs: list[Any]) -> LoweredGraph | str:
    """The lowered graph of ``model(*inputs)`` for C++ kernels, or why the lowering cannot take it."""
    return lower(model, inputs, frozenset({"library"}), render)


def lower(
    model: torch.nn.Module,
    inputs: list[Any],
    run_by_torch: frozenset[str],
    writer: Callable[[LoweredGraph, dict[str, Any] | None], str],
) -> LoweredGraph | str:
    """The lowered graph of ``model(*inputs)``, scheduled with the step kinds ``run_by_torch`` run
    as torch calls and checked by writing it once with ``writer``; or why it cannot be."""
    if not all(isinstance(x, torch.Tensor) and x.device.type == "cpu" for x in inputs):
        return "the lowering traces CPU tensor inputs only"
    try:
        traced = trace(model, inputs)
        if is_random(traced):  # verified in eval mode (see the verifier's ReferenceSide): built for it
            model.eval()
            traced = trace(model, inputs)
    except Exception as exc:
        return f"the reference could not be traced ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    if why := unloweable(traced):
        return why[0]
    out_spec = traced.graph.graph._codegen.pytree_info.out_spec  # type: ignore[attr-defined]
    if out_spec.is_leaf():
        out_kind = "single"
    elif issubclass(out_spec.type, tuple) and all(c.is_leaf() for c in out_spec.children()):
        # a plain tuple, or a torch.return_types record (torch.max over a dim): returned as the same type
        out_kind = "tuple" if out_spec.type is tuple else f"{out_spec.type.__module__}.{out_spec.type.__qualname__}"
    else:
        return "the reference returns a nested structure, not a tensor or a tuple of tensors"
    try:
        sched = schedule(traced, run_by_torch)
        uses_erf = any(packet_name(n) == "prims.erf" for n in traced.graph.graph.nodes)
        specs = tuple((tuple(x.shape), x.dtype) for x in inputs)
        lowered = LoweredGraph(traced, sched, out_kind, specs, uses_erf, model.training)
        writer(lowered, None)  # every step can be written
    except Unsupported as exc:
        return str(exc)
    except Exception as exc:  # a gap in the lowering itself: said as a refusal, never a traceback
        return f"the lowering failed on it ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
    return lowered


def space(lowered: LoweredGraph) -> dict[str, list[Any]]:
    return lowered.knobs()


def canonical(lowered: LoweredGraph, config: dict[str, Any]) -> dict[str, Any]:
    return config


def _step_cpp(name: str, step: Step, sched: Schedule, cfg: dict[str, Any]) -> str:
    if step.kind == "pointwise":
        return pointwise_step(name, step.node, sched, cfg)
    if step.kind == "reduce":
        return reduce_step(name, step.node, sched, cfg)
    writer = {"scan": scan_step, "arg": arg_step, "pool": pool_step}[step.kind]
    return writer(name, step, sched, cfg)


def _program(lowered: LoweredGraph, cfg: dict[str, Any]) -> tuple[str, list[str]]:
    """The C++ source and the lines of ``forward`` that run it."""
    sched = lowered.sched
    cpp_parts: list[str] = []
    lines: list[str] = []
    stage: list[str] = []

    def close_stage() -> None:
        if stage:
            k = len([p for p in cpp_parts if p.startswith("\nextern")])
            calls = "".join(f"    {s}(b);\n" for s in stage)
            cpp_parts.append(f'\nextern "C" void stage{k}(void** b) {{\n{calls}}}\n')
            lines.append(f"_lib.stage{k}(_table(b))")
            stage.clear()

    units = row_groups(sched.steps) if cfg.get("fuse", True) else list(sched.steps)
    for k, unit in enumerate(units):
        if isinstance(unit, Step) and unit.kind == "library":
            close_stage()
            lines.extend(library_lines(unit, sched))
            continue
        members = unit.steps if isinstance(unit, RowGroup) else (unit,)
        lines.extend(allocation(w, sched) for s in members for w in s.writes)
        fused = fused_row_step(f"step{k}", unit, sched, cfg) if isinstance(unit, RowGroup) else None
        if fused is not None:
            cpp_parts.append(fused)
            stage.append(f"step{k}")
            continue
        for j, step in enumerate(members):  # a group whose fusion could change a result runs unfused
            cpp_parts.append(_step_cpp(f"step{k}_{j}", step, sched, cfg))
            stage.append(f"step{k}_{j}")
    close_stage()
    lines.extend(closing_lines(lowered.traced, sched, lowered.out_kind))
    header = HEADER + "#include <algorithm>\n#include <limits>\n" + FMATH + VECTOR_MATH
    header += ERF[str(cfg.get("erf", "torch"))]
    return header + "".join(cpp_parts), lines


def render(lowered: LoweredGraph, config: dict[str, Any] | None = None) -> str:
    cfg = {**DEFAULT, **(config or {})}
    cpp_src, run_lines = _program(lowered, cfg)
    knobs = lowered.knobs()
    shown = effective_config(knobs, {k: cfg[k] for k in knobs}, lambda c: c)
    body = "".join(f"        {line}\n" for line in [*load_lines(lowered.traced, lowered.sched), *run_lines])
    specs = [(shape, str(dtype)) for shape, dtype in lowered.inputs]
    nslots = len(lowered.sched.buffers)
    steps = ", ".join(s.kind for s in lowered.sched.steps)
    return f'''"""forge built-in coder: the general lowering (C++, OpenMP + SIMD): steps {steps}.

Tuned config: {shown!r}
"""

import ctypes

import torch

from forge import cpp
from forge_reference import Model

_lib = cpp.load(r"""{cpp_src}""")
{constant_table(lowered.traced, lowered.sched)}_INPUTS = {specs!r}
_TRAINING = {lowered.training!r}  # the mode the kernel computes (BatchNorm, dropout differ by mode)


{ATTR_SOURCE}def _table(b):
    return (ctypes.c_void_p * len(b))(*[0 if t is None else t.data_ptr() for t in b])


def _built_for(xs):
    return len(xs) == len(_INPUTS) and all(
        isinstance(x, torch.Tensor) and tuple(x.shape) == s and str(x.dtype) == d and x.device.type == "cpu"
        for x, (s, d) in zip(xs, _INPUTS)
    )


class ModelNew(Model):
    def forward(self, *xs):
        if self.training != _TRAINING or not _built_for(xs):  # not what it was built for: the reference
            return super().forward(*xs)
        b = [None] * {nslots}
{body}'''


__all__ = ["DEFAULT", "LoweredGraph", "analyze", "canonical", "lower", "render", "space"]
