"""The lowering as a kernel family of the built-in coder: a traced reference becomes one C++
library of steps and a Python ``ModelNew`` that runs them.

``analyze`` traces and schedules (``schedule``); ``render`` writes the candidate: every run of
consecutive C++ steps is one exported ``stage<k>`` function over a table of buffer pointers;
library producers run between stages as the same torch calls the reference makes; module buffers
a training-mode reference updates are written back after the last stage.

Modes: the reference is traced in eval mode (what the bank's users call) and in training mode.
An op whose two graphs are the same gets one kernel for both modes; an op that computes another
op in training mode (BatchNorm) gets both kernels, chosen by ``self.training`` at call time; an
op that draws random numbers in training mode (dropout) gets eval mode's kernel, and the
reference runs in training mode. Called with other shapes, dtypes or devices than it was built
for, or built with state of other shapes (other constructor arguments), ``ModelNew`` runs the
reference rather than read out of bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from forge.agents.builtin.cpp_snippets import HEADER
from forge.agents.builtin.lowering.code import CodeBuffer
from forge.agents.builtin.lowering.cpp_emit import pointwise_step
from forge.agents.builtin.lowering.cpp_fuse import RowGroup, fused_row_step, row_groups
from forge.agents.builtin.lowering.cpp_kept import STEP_MATH, arg_step, scan_step
from forge.agents.builtin.lowering.cpp_pool import PoolTail, pool_step, pool_tails, pool_with_tail
from forge.agents.builtin.lowering.cpp_reduce import reduce_step
from forge.agents.builtin.lowering.cpp_stack import stacked_parts, stacked_step
from forge.agents.builtin.lowering.cpp_winograd import WINOGRAD, winograd_conv, winograd_step
from forge.agents.builtin.lowering.cpu_knobs import DEFAULT, WIDE_SIMD, cpu_knobs
from forge.agents.builtin.lowering.ir import Unsupported
from forge.agents.builtin.lowering.joint import JointLowered, lower_joint
from forge.agents.builtin.lowering.joint_source import JOINT_NAMES, joint_entry, joint_method_body, joint_tables
from forge.agents.builtin.lowering.layout import conv2d_parts
from forge.agents.builtin.lowering.py_side import (
    allocation,
    built_for_source,
    call_imports,
    closing_lines,
    constant_table,
    library_lines,
    load_lines,
    model_new_class,
    onednn_linear_lines,
    state_check,
)
from forge.agents.builtin.lowering.schedule import Schedule, Step, StepKind, schedule
from forge.agents.builtin.lowering.trace import Traced, is_random, packet_name, trace, unloweable
from forge.agents.builtin.ops import COSTLY, CppMath, cpp_math_of, cpp_math_source
from forge.agents.builtin.py_snippets import ATTR_SOURCE
from forge.agents.builtin.tuner import effective_config
from forge.core.module_call import rebuildable


@dataclass(frozen=True)
class ModeGraph:
    """One mode's traced graph and its schedule."""

    traced: Traced
    sched: Schedule


@dataclass(frozen=True)
class LoweredGraph:
    """A traced reference and its schedule (what ``render`` writes a candidate from): eval mode's
    graph, and training mode's where it differs."""

    traced: Traced
    sched: Schedule
    out_kind: str  # single | tuple | the torch.return_types record the reference returns
    inputs: tuple[tuple[tuple[int, ...], torch.dtype], ...]  # the op's inputs' shapes and dtypes
    # the vectorisable functions its kernels call (``ops.cpp_math``): its ops' and its steps'
    cpp_math: frozenset[CppMath] = frozenset()
    # the SIMD width knob applies (``WIDE_SIMD``): a transcendental (exp, log, tanh, erf, pow, ...) in
    # its math; the built-in coder clears it where the CPU that verifies has no AVX-512 (the knob's
    # two settings are the same code there)
    wide_simd: bool = False
    train: ModeGraph | None = None  # training mode's graph, when it is another op (BatchNorm)
    train_random: bool = False  # random in training mode (dropout): the reference runs there
    joint: JointLowered | None = None  # the training kernels (forward and backward), when asked for
    call: str | None = None  # the template of the call the op makes (``module_call``), where not model(*xs)
    layout: str | None = None  # then the structure around its outputs (``output_layout``)

    @property
    def graphs(self) -> tuple[ModeGraph, ...]:
        """Eval mode's graph, then training mode's when it has one of its own."""
        return (ModeGraph(self.traced, self.sched), *((self.train,) if self.train else ()))

    @property
    def scheduled(self) -> tuple[ModeGraph, ...]:
        """Every graph a kernel is written from: the modes', then the training kernels' forward
        and backward."""
        joint = tuple(ModeGraph(t, s) for t, s in self.joint.graphs) if self.joint else ()
        return (*self.graphs, *joint)

    @property
    def uses_erf(self) -> bool:
        """An exact GELU's erf is in its math: the erf knob (``ops.ERF``) applies."""
        return CppMath.ERF in self.cpp_math

    def knobs(self) -> dict[str, list[Any]]:
        return cpu_knobs([g.sched for g in self.scheduled], uses_erf=self.uses_erf, wide_simd=self.wide_simd)


def analyze(model: torch.nn.Module, inputs: list[Any], call: str | None = None) -> LoweredGraph | str:
    """The lowered graph of ``model(*inputs)`` (or of the call ``call`` writes, a template of
    ``module_call``) for C++ kernels, or why the lowering cannot take it."""
    return lower(model, inputs, frozenset({StepKind.LIBRARY}), render, call=call)


def analyze_train(model: torch.nn.Module, inputs: list[Any]) -> LoweredGraph | str:
    """``analyze`` with the training kernels too (``joint``), or why the op cannot have them."""
    return lower(model, inputs, frozenset({StepKind.LIBRARY}), render, train=True)


def lower(
    model: torch.nn.Module,
    inputs: list[Any],
    run_by_torch: frozenset[StepKind],
    writer: Callable[[LoweredGraph, dict[str, Any] | None], str],
    train: bool = False,
    call: str | None = None,
) -> LoweredGraph | str:
    """The lowered graph of ``model(*inputs)`` in eval mode and, where it differs, in training
    mode, scheduled with the step kinds ``run_by_torch`` run as torch calls and checked by writing
    it once with ``writer``; or why it cannot be. ``train``: with the training kernels too
    (``joint``), or the reason there are none. ``call``: the call's template (``module_call``),
    ``inputs`` its tensors (inference only)."""
    if not all(isinstance(x, torch.Tensor) and x.device.type == "cpu" for x in inputs):
        return "the lowering traces CPU tensor inputs only"
    was_training = model.training
    try:
        traced = trace(model.eval(), inputs, call)
        in_training = trace(model.train(), inputs, call)
    except Exception as exc:
        return f"the reference could not be traced ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    finally:
        model.train(was_training)
    if why := unloweable(traced):
        return why[0]
    refused = _call_refusal(traced, in_training) if call is not None else None
    if refused is not None:
        return refused
    out_kind = traced.out_kind
    if out_kind is None:
        return "the reference returns a nested structure, not a tensor or a tuple of tensors"
    train_random = is_random(in_training)
    differs = not train_random and in_training.graph.code != traced.graph.code
    if differs and (why := unloweable(in_training)):
        return f"in training mode, {why[0]}"
    if differs and in_training.out_kind != out_kind:
        return "the reference returns another structure in training mode"
    try:
        sched = schedule(traced, run_by_torch)
        train_graph = ModeGraph(in_training, schedule(in_training, run_by_torch)) if differs else None
        names = {packet_name(n) for g in (traced, in_training) for n in g.graph.graph.nodes}
        math, wide_simd = _math_of(names), bool(names & COSTLY)
        specs = tuple((tuple(x.shape), x.dtype) for x in inputs)
        lowered = LoweredGraph(
            traced,
            sched,
            out_kind,
            specs,
            math,
            wide_simd,
            train_graph,
            train_random,
            call=call,
            layout=traced.layout,
        )
        with_joint = _with_joint(lowered, model, inputs, run_by_torch) if train else lowered
        if isinstance(with_joint, str):
            return with_joint
        lowered = with_joint
        writer(lowered, None)  # every step can be written
    except Unsupported as exc:
        return str(exc)
    except Exception as exc:  # a gap in the lowering itself: said as a refusal, never a traceback
        return f"the lowering failed on it ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
    return lowered


def _call_refusal(traced: Traced, in_training: Traced) -> str | None:
    """Why a kernel traced through a call cannot return the reference's structure (None: it can)."""
    layout = traced.layout or "tensor"
    if not rebuildable(layout):
        return f"the reference returns {layout}: the built-in agent's kernels return tensors, tuples and dicts"
    if in_training.layout != traced.layout:
        return f"the reference returns {in_training.layout} in training mode and {layout} in eval mode"
    return None


def _with_joint(
    lowered: LoweredGraph, model: torch.nn.Module, inputs: list[Any], run_by_torch: frozenset[StepKind]
) -> LoweredGraph | str:
    """``lowered`` with the training kernels' graphs (raises Unsupported as ``schedule`` does), or
    why it can have none."""
    if lowered.train is not None or lowered.train_random:
        return "for training: the op computes another thing in training mode than in eval mode"
    if lowered.out_kind not in ("single", "tuple"):
        return "for training: the reference returns a torch.return_types record"
    joint = lower_joint(model, inputs, run_by_torch)
    if isinstance(joint, str):
        return f"for training: {joint}"
    names = {packet_name(n) for traced, _ in joint.graphs for n in traced.graph.graph.nodes}
    math = lowered.cpp_math | _math_of(names)
    return replace(lowered, joint=joint, cpp_math=math, wide_simd=lowered.wide_simd or bool(names & COSTLY))


def _math_of(names: set[str]) -> frozenset[CppMath]:
    """The vectorisable functions the kernels of a graph whose nodes are ``names`` call: its
    pointwise ops' (``ops.cpp_math_of``) and its steps' own (``cpp_kept.STEP_MATH``)."""
    steps = (math for name in names for math in STEP_MATH.get(name, ()))
    return cpp_math_of(names) | frozenset(steps)


def mode_dispatch(lowered: LoweredGraph, run: str) -> list[str]:
    """``forward``'s lines after the shape check: the kernel of the module's mode (``run`` is the
    method name of eval mode's; training mode's is ``run`` + ``_train``), or the reference; with
    training kernels, those where autograd needs gradients (``joint_source``)."""
    if lowered.joint is not None:
        kernels = mode_dispatch(replace(lowered, joint=None), run)
        return ["if _needs_grad(self, xs):", "    return self._joint(xs)", *kernels]
    if lowered.train is not None:
        return [f"return self.{run}_train(xs) if self.training else self.{run}(xs)"]
    if lowered.train_random:  # dropout draws random numbers in training mode: the reference there
        return ["if self.training:", "    return self._reference(xs)", f"return self.{run}(xs)"]
    return [f"return self.{run}(xs)"]  # the same op in both modes


def method(name: str, lines: list[str]) -> str:
    """A method of ``ModelNew`` taking the op's inputs as ``xs``."""
    code = CodeBuffer(level=1)
    code.line("")
    code.line(f"def {name}(self, xs):")
    with code.indented():
        code.lines(lines)
    return code.text()


def dispatch_lines(lowered: LoweredGraph) -> str:
    """``forward``'s lines after the shape check (``mode_dispatch``), indented as its body."""
    code = CodeBuffer(level=2)
    code.lines(mode_dispatch(lowered, "_kernel"))
    return code.text()


def space(lowered: LoweredGraph) -> dict[str, list[Any]]:
    return lowered.knobs()


def canonical(lowered: LoweredGraph, config: dict[str, Any]) -> dict[str, Any]:
    return config


def _step_cpp(name: str, step: Step, sched: Schedule, cfg: dict[str, Any]) -> str:
    if step.kind is StepKind.POINTWISE:
        stack = stacked_parts(step.node, sched)
        if stack is not None and sched.slot(step.node) not in sched.layouts:  # it writes row-major
            return stacked_step(name, step.node, stack, sched, cfg)
        return pointwise_step(name, step.node, sched, cfg)
    if step.kind is StepKind.REDUCE:
        return reduce_step(name, step.node, sched, cfg)
    writer = {StepKind.SCAN: scan_step, StepKind.ARG: arg_step, StepKind.POOL: pool_step}[step.kind]
    return writer(name, step, sched, cfg)


def _program(graph: ModeGraph, cfg: dict[str, Any], prefix: str) -> tuple[str, list[str]]:
    """The C++ functions of one mode's graph (named with ``prefix``) and the lines of its method."""
    sched = graph.sched
    cpp_parts: list[str] = []
    lines: list[str] = []
    stage: list[str] = []

    def close_stage() -> None:
        if stage:
            k = len([p for p in cpp_parts if p.startswith("\nextern")])
            code = CodeBuffer()
            code.line("")
            with code.block(f'extern "C" void {prefix}stage{k}(void** b)'):
                code.lines(f"{s}(b);" for s in stage)
            cpp_parts.append(code.text())
            lines.append(f"_lib.{prefix}stage{k}(_table(b))")
            stage.clear()

    units = row_groups(sched.steps) if cfg.get("fuse", True) else list(sched.steps)
    # a fused row step writes row-major: a group writing a channels-last buffer runs unfused
    units = [
        part
        for unit in units
        for part in (unit.steps if isinstance(unit, RowGroup) and _writes_laid_out(unit, sched) else (unit,))
    ]
    units = pool_tails(units, sched, cfg) if cfg.get("fuse", True) else units
    for k, unit in enumerate(units):
        conv = winograd_conv(unit, sched) if isinstance(unit, Step) and cfg["conv_algo"] == "winograd" else None
        if isinstance(unit, Step) and conv is not None:
            lines.append(allocation(unit.node, sched))
            cpp_parts.append(winograd_step(f"{prefix}step{k}", conv, sched, cfg))
            stage.append(f"{prefix}step{k}")
            continue
        if isinstance(unit, Step) and unit.kind is StepKind.LIBRARY:
            close_stage()
            onednn = onednn_linear_lines(unit, sched) if cfg["matmul"] == "onednn" else None
            lines.extend(onednn or library_lines(unit, sched))
            continue
        members = unit.steps if isinstance(unit, RowGroup | PoolTail) else (unit,)
        lines.extend(allocation(w, sched) for s in members for w in s.writes if w not in sched.overwrites)
        fused = _fused_unit(f"{prefix}step{k}", unit, sched, cfg)
        if fused is not None:
            cpp_parts.append(fused)
            stage.append(f"{prefix}step{k}")
            continue
        for j, step in enumerate(members):  # a group whose fusion could change a result runs unfused
            cpp_parts.append(_step_cpp(f"{prefix}step{k}_{j}", step, sched, cfg))
            stage.append(f"{prefix}step{k}_{j}")
    close_stage()
    return "".join(cpp_parts), lines


def _fused_unit(name: str, unit: RowGroup | PoolTail | Step, sched: Schedule, cfg: dict[str, Any]) -> str | None:
    """A group's one kernel, or None (a lone step, or a group whose fusion could change a result)."""
    if isinstance(unit, RowGroup):
        return fused_row_step(name, unit, sched, cfg)
    return pool_with_tail(name, unit, sched, cfg) if isinstance(unit, PoolTail) else None


def _writes_laid_out(group: RowGroup, sched: Schedule) -> bool:
    return any(sched.slot(w) in sched.layouts for s in group.steps for w in s.writes)


def _laid_out(graph: ModeGraph, cfg: dict[str, Any]) -> ModeGraph:
    """``graph`` scheduled with its convolutions' buffers channels-last, where the config says so."""
    if cfg.get("conv_layout") != "channels_last" or not any(conv2d_parts(s.node) for s in graph.sched.steps):
        return graph
    return ModeGraph(graph.traced, schedule(graph.traced, frozenset({StepKind.LIBRARY}), channels_last=True))


def _joint_program(lowered: LoweredGraph, joint: JointLowered, cfg: dict[str, Any]) -> tuple[str, str, str]:
    """The training kernels' C++ functions, their module-level Python and ``ModelNew``'s methods."""
    cpp_src, methods = "", joint_entry(lowered.out_kind)
    for which, ((traced, sched), (prefix, _, name)) in enumerate(zip(joint.graphs, JOINT_NAMES, strict=True)):
        cpp_part, run_lines = _program(ModeGraph(traced, sched), cfg, prefix)
        cpp_src += cpp_part
        methods += method(name, joint_method_body(joint, which, run_lines, None))
    return cpp_src, joint_tables(joint), methods


# Per mode: the prefix of its C++ functions, its constants' table and its method's name.
MODE_NAMES = (("", "_CONSTANTS", "_kernel"), ("train_", "_CONSTANTS_TRAIN", "_kernel_train"))


def render(lowered: LoweredGraph, config: dict[str, Any] | None = None) -> str:
    cfg = {**DEFAULT, **(config or {})}
    header = HEADER + "#include <algorithm>\n#include <limits>\n"
    if lowered.wide_simd and int(cfg["simd_width"]) == 512:
        header = WIDE_SIMD + header
    cpp_src = header + cpp_math_source(lowered.cpp_math, str(cfg.get("erf", "torch")))
    tables, methods = "", ""
    for given, (prefix, constants, name) in zip(lowered.graphs, MODE_NAMES, strict=False):
        graph = _laid_out(given, cfg)
        cpp_part, run_lines = _program(graph, cfg, prefix)
        if "forge_winograd3x3(" in cpp_part and WINOGRAD not in cpp_src:
            cpp_src += WINOGRAD
        cpp_src += cpp_part
        tables += constant_table(graph.traced, graph.sched, constants)
        body = [*load_lines(graph.traced, graph.sched, constants=constants), *state_check(graph.traced), *run_lines]
        body += closing_lines(graph.traced, graph.sched, lowered.out_kind)
        methods += method(name, [f"b = [None] * {len(graph.sched.buffers)}", *body])
    if lowered.joint is not None:
        cpp_part, joint_tables_source, joint_methods = _joint_program(lowered, lowered.joint, cfg)
        if "forge_winograd3x3(" in cpp_part and WINOGRAD not in cpp_src:
            cpp_src += WINOGRAD
        cpp_src += cpp_part
        tables += joint_tables_source
        methods += joint_methods
    knobs = lowered.knobs()
    shown = effective_config(knobs, {k: cfg[k] for k in knobs}, lambda c: c)
    specs = [(shape, str(dtype)) for shape, dtype in lowered.inputs]
    built_for = built_for_source(specs, lowered.traced, lowered.sched, '"cpu"')
    steps = ", ".join(s.kind for s in lowered.sched.steps)
    dispatch = dispatch_lines(lowered)
    return f'''"""forge built-in coder: the general lowering (C++, OpenMP + SIMD): steps {steps}.

Tuned config: {shown!r}
"""

import ctypes

import torch

from forge import cpp
from forge_reference import Model
{call_imports(lowered.call)}
_lib = cpp.load(r"""{cpp_src}""")
{tables}{built_for}

{ATTR_SOURCE}def _table(b):
    return (ctypes.c_void_p * len(b))(*[0 if t is None else t.data_ptr() for t in b])


{model_new_class(lowered.call, lowered.layout, dispatch, methods)}'''


__all__ = [
    "DEFAULT",
    "LoweredGraph",
    "ModeGraph",
    "analyze",
    "analyze_train",
    "canonical",
    "lower",
    "method",
    "mode_dispatch",
    "render",
    "space",
]
