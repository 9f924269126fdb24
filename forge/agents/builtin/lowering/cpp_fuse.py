"""Row fusion: reductions over the same axes of the same shape, and the pass that broadcasts
their results back (every norm and softmax), as one kernel with one task per kept index.

Unfused, a layernorm written out is three parallel loops over memory (mean, variance, output),
each reading the whole input. Fused, each task reduces its row (a channel, a group) in turn and
writes its output while the row is still in cache, so the input comes from memory about once.
A fusion is taken only when it cannot change a result: every read of a member's result inside
the kernel must be at the task's own kept index (checked on the generated loads), and the tuner's
``fuse`` knob can still turn it off where it measures slower.

The output pass may write another shape than the reductions read (a GroupNorm reduces
``x.view(N, G, C // G, H * W)`` and writes ``(N, C, H, W)``): where the kept axes lead, each task's
rows are one contiguous run of the input, and the output's run at the same place is a box of its
own indices (``task_box``), which the task writes. Its reads of the members' results are then
checked by evaluating each load's offset at every output index (``offset_is_task``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.code import CodeBuffer, Statement, delinear_into
from forge.agents.builtin.lowering.cpp_emit import cpp_reader, simd_loop, step_function, threads_clause
from forge.agents.builtin.lowering.cpp_reduce import first_pass_sum, reduction_of, row_block
from forge.agents.builtin.lowering.ir import ctype_of, dtype_of, linear, shape_of
from forge.agents.builtin.lowering.reader import Reader, without_buffer
from forge.agents.builtin.lowering.schedule import Schedule, Step, StepKind, inlined_region
from forge.agents.builtin.lowering.trace import NodeKind, kind_of, packet_name
from forge.agents.builtin.ops import COSTLY


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
        tail = after if after is not None and key and _tail_fits(after, key) else None
        if key is not None and (j - k >= 2 or tail is not None):
            out.append(RowGroup(tuple(steps[k:j]), tail))
            k = j + (1 if tail is not None else 0)
        else:
            out.append(steps[k])
            k += 1
    return out


def _tail_fits(after: Step, key: tuple[tuple[int, ...], tuple[int, ...]]) -> bool:
    """Whether a pointwise step can be the output pass of the reductions keyed ``key``: over
    their input's shape, or a shape whose elements each task's run of the input covers."""
    if after.kind is not StepKind.POINTWISE:
        return False
    shape, dims = key
    out = shape_of(after.node)
    return out == shape or task_box(shape, [k for k in range(len(shape)) if k not in dims], out) is not None


def task_box(shape: tuple[int, ...], kept: list[int], out: tuple[int, ...]) -> tuple[int, int] | None:
    """Where ``kept`` are the leading axes of ``shape``, task ``o`` (a kept index) covers the
    contiguous run [o * R, (o + 1) * R) of it, R the reduced axes' size; in ``out`` (as many
    elements) that run is the box: axes before ``p`` fixed, ``m`` consecutive values of axis
    ``p``, every value of the axes after it. (p, m), or None where no axis splits the run so."""
    if kept != list(range(len(kept))) or math.prod(out) != math.prod(shape) or not out:
        return None
    run = math.prod(shape[len(kept) :])
    inner = 1
    for p in range(len(out) - 1, -1, -1):
        if inner > run:
            return None
        if run % inner == 0 and out[p] % (run // inner) == 0:
            return p, run // inner
        inner *= out[p]
    return None


_OFFSET_CHARS = re.compile(r"[0-9a-z_ ()+*/%]*")
CHECK_MAX = 1 << 22  # output elements an offset is evaluated at (beyond: the steps run unfused)


def offset_is_task(offset: str, names: list[str], shape: list[int], run: int) -> bool:
    """Whether the C offset expression ``offset`` (over the index variables ``names`` of a
    row-major ``shape``) equals, at every index, the index of the task whose run holds that
    element (its flat index // ``run``). Evaluated exactly, over every index; an expression with
    anything but indices, integers, + * / % and parentheses (a subtraction, a select) is not
    taken, so C's truncating division is Python's floor division on what remains."""
    expr = re.sub(r"\((?:int32_t|int64_t)\)", "", offset)
    if not _OFFSET_CHARS.fullmatch(expr) or math.prod(shape) > CHECK_MAX:
        return False
    grids = torch.meshgrid(*[torch.arange(n) for n in shape], indexing="ij")
    try:
        got = eval(expr.replace("/", "//"), {"__builtins__": {}}, dict(zip(names, grids, strict=True)))
    except (NameError, SyntaxError, TypeError, ZeroDivisionError):
        return False
    flat = torch.arange(math.prod(shape)).reshape(shape)
    return bool(torch.equal(torch.as_tensor(got).expand(shape), flat // run))


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
    stash_to = f"b{sched.slot(group.output.node)}" if stash is not None and group.output is not None else None
    blocks, types = _reduction_blocks(group, sched, cfg, reader, own, stash_to)
    writes = {sched.slot(s.node): f"b{sched.slot(s.node)}" for s in group.reductions}
    tail = CodeBuffer()
    out_shape = list(shape_of(group.output.node)) if group.output is not None else shape
    out_names = names if out_shape == shape else [f"u{k}" for k in range(len(out_shape))]
    box = task_box(tuple(shape), kept, tuple(out_shape)) if out_shape != shape else None
    if group.output is not None:
        node = group.output.node
        out_reader = Reader(without_buffer(sched, node), reader.dialect, reader.reads, reader.loads)
        if stash is not None:
            out_reader.stash[stash] = sched.slot(node)
        lin = linear(out_names, out_shape) if box is None else _box_flat(box, out_names, out_shape)
        value = out_reader.value(node, out_names, lin)
        if out_reader.stash_loads - {lin}:
            return None  # read elsewhere than where this place's pass stored it
        body = [*out_reader.lines, Statement(f"b{sched.slot(node)}[{lin}] = {value};")]
        if out_shape == shape:
            _nest(tail, [k for k in dims if k != nd - 1], names, shape, body)
        elif box is not None:
            _box_nest(tail, box, out_names, out_shape, body)
        else:
            return None
        writes[sched.slot(node)] = f"b{sched.slot(node)}"
    members = {sched.slot(s.node) for s in group.reductions}
    run = math.prod(shape[k] for k in dims)
    for slot, offset in reader.loads:
        # a box's reads are in its own indices: evaluated (a task's run is flat // run only there,
        # where the kept axes lead); elsewhere the read must be the task's own offset as written
        at_task = box is not None and offset_is_task(offset, out_names, out_shape, run)
        if slot in members and offset != own and not at_task:
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


def _reduction_blocks(
    group: RowGroup, sched: Schedule, cfg: dict[str, Any], reader: Reader, own: str, stash_to: str | None
) -> tuple[CodeBuffer, list[str]]:
    """Each reduction's block for one task (storing its result at ``own``), and the typedefs of
    their accumulators. A sum that is a var's first pass (a GroupNorm's decomposition asks for
    both) is stored from that pass, not summed again."""
    blocks, types = CodeBuffer(), []
    reduced = [s.node for s in group.reductions]
    shared = {n: j for n, node in enumerate(reduced) for j in range(n) if first_pass_sum(node, reduced[j], cfg)}
    if stash_to is not None:
        shared.pop(len(reduced) - 1, None)  # the last one's pass also stores the stash: it runs
    for n, node in enumerate(reduced):
        if n in shared:
            blocks.line(f"b{sched.slot(node)}[{own}] = ({ctype_of(dtype_of(node))})S{shared[n]};")
            continue
        if n in shared.values():
            blocks.line(f"ACC{n} S{n};")
        into = stash_to if n == len(reduced) - 1 else None
        with blocks.block():
            acc_t = row_block(node, reader.fresh(), cfg, f"b{sched.slot(node)}", blocks, f"ACC{n}", into)
            if n in shared.values():
                blocks.line(f"S{n} = acc;")
        types.append(f"typedef {acc_t} ACC{n};")
    return blocks, types


_MERGED = "f"  # the SIMD loop over the box's whole trailing axes, as one run


def _box_flat(box: tuple[int, int], names: list[str], shape: list[int]) -> str:
    """The output's flat offset inside the box's loops (``_box_nest``): through the merged
    trailing loop where axes follow ``p``, so a contiguous load or store needs no div/mod."""
    p, _ = box
    if p == len(shape) - 1:
        return linear(names, shape)
    return linear([*names[: p + 1], _MERGED], [*shape[: p + 1], math.prod(shape[p + 1 :])])


def _box_nest(
    code: CodeBuffer, box: tuple[int, int], names: list[str], shape: list[int], body: list[Statement]
) -> None:
    """Loops over task ``o``'s box of the output (``task_box``): the axes before ``p`` set from
    where its run starts, ``m`` values of axis ``p`` from there, and the axes after it whole, as
    one SIMD loop (their indices derived from it for the reads that need them)."""
    p, m = box
    after = math.prod(shape[p + 1 :])
    run = m * after
    if p > 0:
        delinear_into(code, f"(o * {run} / {shape[p] * after})", names[:p], shape[:p])
    start = f"s{names[p]}"
    code.line(f"const int64_t {start} = (o * {run} / {after}) % {shape[p]};")
    if p == len(shape) - 1:
        simd_loop(code, names[p], start, f"{start} + {m}", body)
        return
    merged = set(names[p + 1 :])
    at = frozenset({_MERGED})
    defs, rest = [], _MERGED
    for k in range(len(shape) - 1, p, -1):
        if k == p + 1:
            defs.append(Statement(f"const int64_t {names[k]} = {rest};", at))
        else:
            defs.append(Statement(f"const int64_t {names[k]} = {rest} % {shape[k]};", at))
            defs.append(Statement(f"const int64_t q{names[k]} = {rest} / {shape[k]};", at))
            rest = f"q{names[k]}"
    moved = [
        s if s.uses is None else Statement(s.line, frozenset(_MERGED if u in merged else u for u in s.uses))
        for s in body
    ]
    with code.block(f"for (int64_t {names[p]} = {start}; {names[p]} < {start} + {m}; ++{names[p]})"):
        simd_loop(code, _MERGED, "0", str(after), [*defs, *moved])


def _nest(code: CodeBuffer, mid: list[int], names: list[str], shape: list[int], body: list[Statement]) -> None:
    """Loops over the reduced axes (the last one SIMD) around ``body``, inside a task."""
    if not mid:
        simd_loop(code, names[-1], "0", str(shape[-1]), body)
        return
    k = mid[0]
    with code.block(f"for (int64_t {names[k]} = 0; {names[k]} < {shape[k]}; ++{names[k]})"):
        _nest(code, mid[1:], names, shape, body)
