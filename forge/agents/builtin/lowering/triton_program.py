"""The lowering as a Triton kernel family of the built-in coder (CUDA devices): the same trace and
schedule as the C++ family, each pointwise or reduction step one Triton kernel (``triton_emit``).

Library producers (mm, convolution, SDPA) and the ops kept whole (scans, arg-reductions, pooling)
run as the torch calls the reference makes, on buffers the kernels before them wrote; everything
pointwise is inlined into the kernel that reads it, as on CPU. Modes are handled as by the C++
family (``program``): one kernel for an op that is the same in both, both kernels for one that
is not, the reference in training mode for one that is random there. Called with other shapes,
dtypes or devices than it was built for, ``ModelNew`` runs the reference.
Under ``TRITON_INTERPRET=1`` the same source runs on CPU tensors (how it is tested without a GPU).
"""

from __future__ import annotations

from typing import Any

import torch

from forge.agents.builtin.lowering.ir import Unsupported
from forge.agents.builtin.lowering.joint import JointLowered
from forge.agents.builtin.lowering.joint_source import JOINT_NAMES, joint_entry, joint_method_body, joint_tables
from forge.agents.builtin.lowering.program import (
    MODE_NAMES,
    LoweredGraph,
    ModeGraph,
    canonical,
    dispatch_lines,
    lower,
    method,
)
from forge.agents.builtin.lowering.py_side import (
    allocation,
    built_for_source,
    call_imports,
    closing_lines,
    constant_table,
    library_lines,
    load_lines,
    model_new_class,
    state_check,
)
from forge.agents.builtin.lowering.schedule import StepKind
from forge.agents.builtin.lowering.triton_emit import pointwise_kernel, reduce_kernel
from forge.agents.builtin.ops import HELPERS
from forge.agents.builtin.py_snippets import ATTR_SOURCE
from forge.agents.builtin.tuner import effective_config

RUN_BY_TORCH = frozenset({StepKind.LIBRARY, StepKind.SCAN, StepKind.ARG, StepKind.POOL})
TRITON_DEFAULT: dict[str, Any] = {"block": 1024, "rblock": 1024, "num_warps": 4, "acc": "float32"}


def analyze(model: torch.nn.Module, inputs: list[Any], call: str | None = None) -> LoweredGraph | str:
    """The lowered graph of ``model(*inputs)`` (or of the call ``call`` writes, a template of
    ``module_call``) for Triton kernels, or why the lowering cannot take it."""
    return lower(model, inputs, RUN_BY_TORCH, render, call=call)


def analyze_train(model: torch.nn.Module, inputs: list[Any]) -> LoweredGraph | str:
    """``analyze`` with the training kernels too (``joint``), or why the op cannot have them. The
    trace is a CPU one: a backward it gives as a CPU-only library call (attention's) is refused."""
    lowered = lower(model, inputs, RUN_BY_TORCH, render, train=True)
    if isinstance(lowered, LoweredGraph) and lowered.joint is not None:
        cpu_only = [
            n for traced, _ in lowered.joint.graphs for n in traced.graph.graph.nodes if "for_cpu" in str(n.target)
        ]
        if cpu_only:
            return f"for training: {cpu_only[0].target} runs on CPU only, and the kernels run on the GPU"
    return lowered


def space(lowered: LoweredGraph) -> dict[str, list[Any]]:
    """The tuner's GPU knobs (defaults first): elements per program (a reduction's whole tile),
    reduced elements per tile row, warps, and a reduction's accumulator width."""
    kinds = {s.kind for g in lowered.scheduled for s in g.sched.steps}
    knobs: dict[str, list[Any]] = {"block": [1024, 2048, 4096, 512], "num_warps": [4, 8, 2]}
    if StepKind.REDUCE in kinds:
        knobs["rblock"] = [1024, 256, 64]
        knobs["acc"] = ["float32", "float64"]
    return knobs


def _kernels(graph: ModeGraph, cfg: dict[str, Any], prefix: str) -> tuple[str, list[str]]:
    """One mode's kernels (named with ``prefix``) and the lines of its method that run every step."""
    sched = graph.sched
    kernels: list[str] = []
    lines: list[str] = []
    for k, step in enumerate(sched.steps):
        if step.kind in RUN_BY_TORCH:
            lines.extend(library_lines(step, sched))
            continue
        lines.extend(allocation(w, sched, "dev") for w in step.writes if w not in sched.overwrites)
        writer = pointwise_kernel if step.kind is StepKind.POINTWISE else reduce_kernel
        source, launch = writer(f"_{prefix}step{k}", step.node, sched, cfg)
        kernels.append(source)
        lines.append(launch)
    return "".join(kernels), lines


def _joint_kernels(lowered: LoweredGraph, joint: JointLowered, cfg: dict[str, Any]) -> tuple[str, str]:
    """The training kernels (forward and backward graphs') and ``ModelNew``'s methods running them."""
    kernels, methods = "", joint_entry(lowered.out_kind)
    for which, ((traced, sched), (prefix, _, name)) in enumerate(zip(joint.graphs, JOINT_NAMES, strict=True)):
        source, run_lines = _kernels(ModeGraph(traced, sched), cfg, prefix)
        if not traced.inputs:
            raise Unsupported("a training graph without inputs")
        kernels += source
        methods += method(name, joint_method_body(joint, which, run_lines, "dev"))
    return kernels, methods


def render(lowered: LoweredGraph, config: dict[str, Any] | None = None) -> str:
    cfg = {**TRITON_DEFAULT, **(config or {})}
    kernels, tables, methods = "", "", ""
    for graph, (prefix, constants, name) in zip(lowered.graphs, MODE_NAMES, strict=False):
        source, run_lines = _kernels(graph, cfg, prefix)
        kernels += source
        tables += constant_table(graph.traced, graph.sched, constants)
        body = [
            "dev = xs[0].device if xs else torch.device(_DEVICE)",
            f"b = [None] * {len(graph.sched.buffers)}",
            *load_lines(graph.traced, graph.sched, "dev", constants),
            *state_check(graph.traced),
            *run_lines,
            *closing_lines(graph.traced, graph.sched, lowered.out_kind),
        ]
        methods += method(name, body)
    if lowered.joint is not None:
        joint_kernels, joint_methods = _joint_kernels(lowered, lowered.joint, cfg)
        kernels += joint_kernels
        tables += joint_tables(lowered.joint)
        methods += joint_methods
    knobs = space(lowered)
    shown = effective_config(knobs, {k: cfg[k] for k in knobs}, lambda c: c)
    specs = [(shape, str(dtype)) for shape, dtype in lowered.inputs]
    built_for = built_for_source(specs, lowered.traced, lowered.sched, "_DEVICE")
    steps = ", ".join(s.kind for s in lowered.sched.steps)
    dispatch = dispatch_lines(lowered)
    return f'''"""forge built-in coder: the general lowering (Triton): steps {steps}.

Tuned config: {shown!r}
"""

import os

import torch
import triton
import triton.language as tl

from forge_reference import Model
{call_imports(lowered.call)}
{tables}_DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
{HELPERS}{kernels}

{ATTR_SOURCE}{built_for}

{model_new_class(lowered.call, lowered.layout, dispatch, methods)}'''


__all__ = ["TRITON_DEFAULT", "analyze", "analyze_train", "canonical", "render", "space"]
