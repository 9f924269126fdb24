"""Reading graph values inside one loop body, for any kernel language (its ``Dialect``).

``Reader.value`` turns a graph value read at an index tuple into statements: loads from buffers,
view index maps, and the pointwise expressions of everything inlined, each computed once per
(node, index). Each statement carries the index variables it depends on (``code.Statement``),
gathered from the graph as it is read, so that a loop hoists what does not depend on it
(``code.hoist``). The C++ dialect is ``cpp_emit.CPP``, the Triton one ``triton_emit.TRITON``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.code import Statement
from forge.agents.builtin.lowering.ir import (
    Unsupported,
    delinear,
    dtype_of,
    int_arg,
    keeps_order,
    linear,
    shape_of,
    source_index,
    strided_source,
)
from forge.agents.builtin.lowering.layout import storage_index, storage_shape
from forge.agents.builtin.lowering.schedule import Schedule, in_place_source
from forge.agents.builtin.lowering.trace import NodeKind, kind_of, packet_name
from forge.agents.builtin.ops import OPS

_NAME = re.compile(r"\b[A-Za-z_]\w*")


@dataclass(frozen=True)
class Dialect:
    """How a kernel language writes what ``Reader`` reads."""

    expression: Callable[[fx.Node, list[str]], str]  # a pointwise node over its operands' text
    scalar_operand: Callable[[Any, fx.Node], str]  # a Python-number argument of a pointwise node
    load: Callable[[int, str, int], str]  # buffer slot, row-major offset (C syntax), its element count -> a load
    statement: Callable[[str, fx.Node, str], str]  # temporary's name, node, expression -> a line
    iota: Callable[[fx.Node, str], str]  # iota node, its index (C syntax) -> its value
    literal: Callable[[Any, torch.dtype], str]
    integer: Callable[[str], str]  # a value used as an index (a gather's)
    select: Callable[[str, str, str], str]  # condition, value if true, value if false
    clamp: Callable[[str, int | None, int | None], str]  # an index kept within [low, high] (None: unbounded)


@dataclass
class Reader:
    """Builds the statements that read graph values inside one loop body."""

    sched: Schedule
    dialect: Dialect
    reads: set[int] = field(default_factory=set)
    loads: set[tuple[int, str]] = field(default_factory=set)  # (slot, offset) of every load
    lines: list[Statement] = field(default_factory=list)
    cache: dict[tuple[fx.Node, tuple[str, ...]], str] = field(default_factory=dict)
    # what each temporary depends on: the index variables it reads through. A name not here (a loop
    # variable) depends on itself only; an emitter that derives an index from a loop variable and
    # hoists through it would have to record it here first (none does: pooling's and tiles' derived
    # indices are read inside the loops that define them, which do not hoist)
    uses: dict[str, frozenset[str]] = field(default_factory=dict)
    # the storage order of the buffer the step writes, when not row-major (``layout``): a ``flat``
    # offset is then an offset in that order, right for a buffer stored the same way only
    order: tuple[int, ...] | None = None
    # values an earlier loop of the same kernel stored in a buffer of its own (``cpp_fuse``'s
    # stash): read from there, at the offsets recorded in ``stash_loads``, instead of recomputed
    stash: dict[fx.Node, int] = field(default_factory=dict)
    stash_loads: set[str] = field(default_factory=set)

    def fresh(self) -> Reader:
        """A reader for another loop body of the same step (same buffers, no statements)."""
        return Reader(self.sched, self.dialect, self.reads, self.loads, order=self.order)

    def value(self, node: Any, idx: list[str], flat: str | None = None) -> str:
        """``node`` read at index tuple ``idx``; ``flat``, when given, is the tuple's row-major
        offset in ``node``'s shape (carried through order-keeping views, so loads need no div/mod)."""
        return self._value(node, idx, flat)[0]

    def _value(self, node: Any, idx: list[str], flat: str | None) -> tuple[str, frozenset[str]]:
        """The value's text and the index variables it depends on."""
        if not isinstance(node, fx.Node):
            raise Unsupported(f"a non-tensor value {node!r} where a tensor was expected")
        key = (node, ("flat", flat) if flat is not None else tuple(idx))
        if key in self.cache:
            name = self.cache[key]
            return name, self.uses[name]
        expr, uses = self._expr(node, idx, flat)
        if kind_of(node) is NodeKind.VIEW and node not in self.sched.buffers:
            return expr, uses  # a view is its source read elsewhere: no statement of its own
        name = f"t{len(self.cache)}"
        self.lines.append(Statement(self.dialect.statement(name, node, expr), uses))
        self.uses[name] = uses
        self.cache[key] = name
        return name, uses

    def index_uses(self, index: str) -> frozenset[str]:
        """The index variables an index expression depends on: the names in it (loop variables,
        and the temporaries a gather indexes by, through what they depend on)."""
        found: set[str] = set()
        for name in _NAME.findall(index):
            found |= self.uses.get(name, {name})
        return frozenset(found)

    def _expr(self, node: fx.Node, idx: list[str], flat: str | None) -> tuple[str, frozenset[str]]:
        say = self.dialect
        if node in self.stash:
            offset = flat if flat is not None else linear(idx, shape_of(node))
            self.stash_loads.add(offset)
            return say.load(self.stash[node], offset, math.prod(shape_of(node))), self.index_uses(offset)
        if node in self.sched.buffers:
            slot = self.sched.slot(node)
            perm = self.sched.layouts.get(slot)
            if flat is not None and perm == self.order:
                offset = flat
            else:
                offset = linear(storage_index(idx, perm), storage_shape(shape_of(node), perm))
            self.reads.add(slot)
            self.loads.add((slot, offset))
            return say.load(slot, offset, math.prod(shape_of(node))), self.index_uses(offset)
        name, kind = packet_name(node), kind_of(node)
        if kind is NodeKind.VIEW:
            src = node.args[0]
            if name == "aten.as_strided":  # read from the contiguous value whose storage it views
                base, offset = strided_source(node, idx)
                # a row-major offset: right only in a step that runs in row-major order
                return self._value(base, delinear(offset, shape_of(base)), offset if self.order is None else None)
            return self._value(src, source_index(node, idx), flat if keeps_order(node) and self.order is None else None)
        if kind is NodeKind.POINTWISE:
            shape = shape_of(node)
            ops, uses = [], frozenset[str]()
            for arg in node.args[: OPS[name].arity]:
                if isinstance(arg, fx.Node):
                    same = shape_of(arg) == shape
                    text, used = self._value(arg, idx if same else _scalar_idx(arg, node), flat if same else None)
                    ops.append(text)
                    uses |= used
                else:
                    ops.append(say.scalar_operand(arg, node))
            return say.expression(node, ops), uses
        if name == "aten.gather":
            src, dim, index = node.args[0], int_arg(node, 1), node.args[2]
            at = self.value(index, idx)
            dim %= len(idx)
            return self._value(src, [*idx[:dim], say.integer(at), *idx[dim + 1 :]], None)
        if name == "aten.index":
            return self._index(node, idx)
        if name == "aten.scatter":
            return self._scatter(node, idx, flat)
        if name in CAT_NODES:
            return self._cat(node, idx)
        if (new := in_place_source(node)) is not None:  # schedule checked it: the new value, as it is
            return self._value(new, idx, flat)
        if name == "prims.iota":  # iota(length, *, start, step, dtype, ...)
            return say.iota(node, idx[0]), self.index_uses(idx[0])
        if name in ("aten.full", "prims.full"):
            return say.literal(node.args[1], dtype_of(node)), frozenset()
        # a number as a 0-d tensor: strided slicing's backward divides by its step; a boolean
        # attention mask becomes 0 and -inf through aten's
        if name in ("prims.scalar_tensor", "aten.scalar_tensor"):
            return say.literal(node.args[0], dtype_of(node)), frozenset()
        raise Unsupported(f"{name}: not a node the lowering reads inline")

    def _index(self, node: fx.Node, idx: list[str]) -> tuple[str, frozenset[str]]:
        """``src[..., index, ...]`` with one 1-D integer index tensor along one dim (strided
        slicing's backward reads its gradient so), read at ``idx``: the source at the index's
        value there, a negative one counted from the end as torch does (and kept inside the dim:
        no load leaves the buffer)."""
        src, indices = node.args[0], node.args[1]
        given = [(d, t) for d, t in enumerate(indices) if t is not None] if isinstance(indices, list | tuple) else []
        if len(given) != 1 or not isinstance(given[0][1], fx.Node) or not isinstance(src, fx.Node):
            raise Unsupported("aten.index: other than one index tensor along one dim")
        dim, index = given[0]
        if len(shape_of(index)) != 1 or dtype_of(index) in (torch.bool, torch.uint8):
            raise Unsupported("aten.index: an index that is not a 1-D tensor of integers")
        size = shape_of(src)[dim]
        say = self.dialect
        at = say.integer(self.value(index, [idx[dim]]))
        inside = say.clamp(say.select(f"({at} < 0)", f"({at} + {size})", at), 0, size - 1)
        read, uses = self._value(src, [*idx[:dim], inside, *idx[dim + 1 :]], None)
        return read, uses | self.index_uses(inside)

    def _scatter(self, node: fx.Node, idx: list[str], flat: str | None) -> tuple[str, frozenset[str]]:
        """``scatter(src, dim, index, value)`` of a number, read at ``idx``: the value where the
        index names ``idx``'s place along ``dim``, else the source. Taken where the index holds
        one element along ``dim`` and the source's sizes elsewhere (a class index per row, as
        cross-entropy's backward scatters)."""
        src, _, index, fill = (*node.args, None)[:4]
        if node.kwargs.get("reduce") is not None:
            raise Unsupported("aten.scatter: with a reduction (only a plain scatter of a number is read inline)")
        if not isinstance(src, fx.Node) or not isinstance(index, fx.Node) or isinstance(fill, fx.Node) or fill is None:
            raise Unsupported("aten.scatter: of a tensor of values (only a number is read inline)")
        dim = int_arg(node, 1) % len(idx)
        sizes, held = shape_of(index), shape_of(src)
        if sizes[dim] != 1 or any(a != b for k, (a, b) in enumerate(zip(sizes, held, strict=True)) if k != dim):
            raise Unsupported(
                "aten.scatter: an index of more than one element along its dim, or smaller than the source"
            )
        at, at_uses = self._value(index, [*idx[:dim], "0", *idx[dim + 1 :]], None)
        kept, kept_uses = self._value(src, idx, flat)
        say = self.dialect
        chosen = say.select(f"({say.integer(at)} == {idx[dim]})", say.literal(fill, dtype_of(node)), kept)
        return chosen, at_uses | kept_uses | self.index_uses(idx[dim])

    def _cat(self, node: fx.Node, idx: list[str]) -> tuple[str, frozenset[str]]:
        """A concatenation read at ``idx``: the part whose range holds the index along its dim.
        Every part is read (a statement each), at an index clamped into its own range so that
        no load leaves its buffer, and the right one selected: no branch in the loop body."""
        parts = node.args[0] if isinstance(node.args[0], list | tuple) else [node.args[0]]
        given = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        if isinstance(given, bool) or not isinstance(given, int):
            raise Unsupported(f"{packet_name(node)}: dim {given!r} is not an integer")
        dim = given % len(idx)
        at, start, ranges = idx[dim], 0, []
        for part in parts:
            if not isinstance(part, fx.Node):
                raise Unsupported(f"{packet_name(node)}: a part that is not a tensor")
            size = shape_of(part)[dim]
            if size:  # an empty part holds no element of the result
                ranges.append((part, start, size))
            start += size
        if not ranges:
            raise Unsupported(f"{packet_name(node)}: every part is empty")
        if at.isdigit():  # a constant index: the part is known here
            part, first, size = next(r for r in ranges if int(at) < r[1] + r[2])
            return self._value(part, [*idx[:dim], str(int(at) - first), *idx[dim + 1 :]], None)
        say, chosen, uses = self.dialect, "", self.index_uses(at)
        for k, (part, first, size) in reversed(list(enumerate(ranges))):
            local = f"({at} - {first})" if first else at
            low, high = (0 if k else None), (size - 1 if k < len(ranges) - 1 else None)
            local = "0" if size == 1 else say.clamp(local, low, high) if low is not None or high is not None else local
            text, used = self._value(part, [*idx[:dim], local, *idx[dim + 1 :]], None)
            uses |= used
            chosen = say.select(f"({at} < {first + size})", text, chosen) if chosen else text
        return chosen, uses


CAT_NODES = frozenset({"prims.cat", "aten.cat"})


def _scalar_idx(arg: fx.Node, node: fx.Node) -> list[str]:
    if shape_of(arg) != ():
        raise Unsupported(f"{packet_name(node)}: operands of different shapes without a broadcast")
    return []


def without_buffer(sched: Schedule, node: fx.Node) -> Schedule:
    """``sched`` with ``node`` not a buffer, so that reading it inlines its definition."""
    buffers = {n: s for n, s in sched.buffers.items() if n is not node}
    return Schedule(sched.inputs, buffers, sched.steps, layouts=sched.layouts)
