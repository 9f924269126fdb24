"""Row fusion: reductions over the same axes of the same shape, and the pass that broadcasts
their results back (every norm and softmax), as one kernel with one task per kept index.

Unfused, a layernorm written out is three parallel loops over memory (mean, variance, output),
each reading the whole input. Fused, each task reduces its row (a channel, a group) in turn and
writes its output while the row is still in cache, so the input comes from memory about once.
A fusion is taken only when it cannot change a result: every read of a member's result inside
the kernel must be at the task's own kept index (checked on the generated loads), and the tuner's
``fuse`` knob can still turn it off where it measures slower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from torch import fx

from forge.agents.builtin.lowering.code import CodeBuffer, Statement, delinear_into
from forge.agents.builtin.lowering.cpp_emit import cpp_reader, simd_loop, step_function, threads_clause
from forge.agents.builtin.lowering.cpp_reduce import reduction_of, row_block
from forge.agents.builtin.lowering.ir import dtype_of, linear, shape_of
from forge.agents.builtin.lowering.reader import Reader, without_buffer
from forge.agents.builtin.lowering.schedule import Schedule, Step, StepKind, inlined_region
from forge.agents.builtin.lowering.trace import NodeKind, kind_of, packet_name
from forge.agents.builtin.op_table import COSTLY


@dataclass(frozen=True)
class RowGroup:
    """Consecutive reduction steps over the same input shape and axes (the last one among
    them, some kept), and optionally the pointwise step after them over that whole shape."""

    reductions: tuple[Step, ...]
    output: Step | None

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.reductions + ((self.output,) if self.output else ())


def _row_key(step: Step) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(input shape, reduced axes) of a reduction with the last axis reduced and some kept."""
    if step.kind is not StepKind.REDUCE or step.writes != (step.node,):
        return None
    x = step.node.args[0]
    if not isinstance(x, fx.Node):
        return None
    shape, dims = shape_of(x), reduction_of(step.node).dims
    if not shape or len(shape) - 1 not in dims or len(dims) == len(shape):
        return None
    return shape, dims


def row_groups(steps: list[Step]) -> list[RowGroup | Step]:
    """``steps`` with each run that can share one kernel per kept index made a RowGroup."""
    out: list[RowGroup | Step] = []
    k = 0
    while k < len(steps):
        key = _row_key(steps[k])
        j = k
        while key is not None and j < len(steps) and _row_key(steps[j]) == key:
            j += 1
        after = steps[j] if j < len(steps) else None
        tail = (
            after
            if after is not None and key and after.kind is StepKind.POINTWISE and shape_of(after.node) == key[0]
            else None
        )
        if key is not None and (j - k >= 2 or tail is not None):
            out.append(RowGroup(tuple(steps[k:j]), tail))
            k = j + (1 if tail is not None else 0)
        else:
            out.append(steps[k])
            k += 1
    return out


def fused_row_step(name: str, group: RowGroup, sched: Schedule, cfg: dict[str, Any]) -> str | None:
    """The group's kernel, or None when some read of a member's result is not at the task's own
    kept index (then the steps run unfused)."""
    stash = _stash(group, sched)
    if stash is not None and (kernel := _fused(name, group, sched, cfg, stash)) is not None:
        return kernel
    return _fused(name, group, sched, cfg, None)


def _stash(group: RowGroup, sched: Schedule) -> fx.Node | None:
    """The last reduction's input, where the output pass computes it again and it is costly (a
    softmax's exp): its pass then stores it in the output's buffer, and the output pass reads it
    back from cache at the same place, just before writing its own value there."""
    out = group.output.node if group.output is not None else None
    x = group.reductions[-1].node.args[0]
    if out is None or not isinstance(x, fx.Node) or x in sched.buffers or kind_of(x) is not NodeKind.POINTWISE:
        return None
    if out in sched.overwrites or shape_of(x) != shape_of(out) or dtype_of(x) != dtype_of(out):
        return None  # a buffer shared with what it reads, or a value the buffer cannot hold exactly
    return x if _inline_reads(x, sched, COSTLY) and _inline_reads(out, sched, frozenset({x})) else None


def _inline_reads(node: fx.Node, sched: Schedule, wanted: frozenset[Any]) -> bool:
    """Whether computing ``node`` inline (up to the buffers it loads) computes a node in ``wanted``
    (by node, or by op name)."""
    return any(n in wanted or packet_name(n) in wanted for n in inlined_region(node, sched).nodes)


def _fused(name: str, group: RowGroup, sched: Schedule, cfg: dict[str, Any], stash: fx.Node | None) -> str | None:
    first = group.reductions[0].node.args[0]
    assert isinstance(first, fx.Node)
    shape = list(shape_of(first))
    nd = len(shape)
    dims = reduction_of(group.reductions[0].node).dims
    kept = [k for k in range(nd) if k not in dims]
    names = [f"i{k}" for k in range(nd)]
    own = linear([names[k] for k in kept], [shape[k] for k in kept])
    reader = cpp_reader(sched)
    blocks, types = CodeBuffer(), []
    stash_to = f"b{sched.slot(group.output.node)}" if stash is not None and group.output is not None else None
    for n, step in enumerate(group.reductions):
        into = stash_to if n == len(group.reductions) - 1 else None
        with blocks.block():
            acc_t = row_block(step.node, reader.fresh(), cfg, f"b{sched.slot(step.node)}", blocks, f"ACC{n}", into)
        types.append(f"typedef {acc_t} ACC{n};")
    writes = {sched.slot(s.node): f"b{sched.slot(s.node)}" for s in group.reductions}
    tail = CodeBuffer()
    if group.output is not None:
        node = group.output.node
        out_reader = Reader(without_buffer(sched, node), reader.dialect, reader.reads, reader.loads)
        if stash is not None:
            out_reader.stash[stash] = sched.slot(node)
        lin = linear(names, shape)
        value = out_reader.value(node, names, lin)
        if out_reader.stash_loads - {lin}:
            return None  # read elsewhere than where this place's pass stored it
        body = [*out_reader.lines, Statement(f"b{sched.slot(node)}[{lin}] = {value};")]
        _nest(tail, [k for k in dims if k != nd - 1], names, shape, body)
        writes[sched.slot(node)] = f"b{sched.slot(node)}"
    members = {sched.slot(s.node) for s in group.reductions}
    if any(slot in members and offset != own for slot, offset in reader.loads):
        return None
    outer = math.prod(shape[k] for k in kept)
    code = CodeBuffer()
    code.lines(types)
    code.line(f"#pragma omp parallel for schedule(static){threads_clause(cfg)}")
    with code.block(f"for (int64_t o = 0; o < {outer}; ++o)"):
        delinear_into(code, "o", [names[k] for k in kept], [shape[k] for k in kept])
        code.splice(blocks)
        code.splice(tail)
    return step_function(name, sched, reader.reads, writes, code)


def _nest(code: CodeBuffer, mid: list[int], names: list[str], shape: list[int], body: list[Statement]) -> None:
    """Loops over the reduced axes (the last one SIMD) around ``body``, inside a task."""
    if not mid:
        simd_loop(code, names[-1], "0", str(shape[-1]), body)
        return
    k = mid[0]
    with code.block(f"for (int64_t {names[k]} = 0; {names[k]} < {shape[k]}; ++{names[k]})"):
        _nest(code, mid[1:], names, shape, body)
