"""C++ for the lowering's pointwise and reduction steps.

A step is one OpenMP-parallel loop nest. Inside it, ``Reader.value`` turns a graph value read at
an index tuple into C++ statements: loads from buffers, view index maps, and the pointwise
expressions of everything inlined (``cpp_expr``), each computed once per (node, index).

Loop shapes:
- pointwise: the outer dimensions flattened into one parallel loop, the last one a SIMD loop
  (split into chunks when there are too few outer blocks to keep every thread busy);
- reduction over axes that include the last: one parallel task per output, SIMD reduction over
  the last axis (when every axis is reduced, the parallel loop reduces too);
- reduction that keeps the last axis: per output row a chunk of accumulators, SIMD across it.
Sums accumulate in ``acc`` (double by default, the tuner's knob); max/min keep NaN as torch does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.cpp_expr import expression, scalar_operand
from forge.agents.builtin.lowering.ir import (
    Unsupported,
    ctype_of,
    delinear,
    dtype_of,
    int_arg,
    keeps_order,
    linear,
    literal,
    shape_of,
    source_index,
)
from forge.agents.builtin.lowering.schedule import Schedule
from forge.agents.builtin.lowering.trace import kind_of, packet_name

SPLIT_BELOW = 64  # fewer outer blocks than this: the inner loop is split into chunks across threads


@dataclass(frozen=True)
class Dialect:
    """How a kernel language writes what ``Reader`` reads: C++ here, Triton in ``triton_emit``."""

    expression: Callable[[fx.Node, list[str]], str]  # a pointwise node over its operands' text
    scalar_operand: Callable[[Any, fx.Node], str]  # a Python-number argument of a pointwise node
    load: Callable[[int, str], str]  # buffer slot, row-major offset (C syntax) -> a load
    statement: Callable[[str, fx.Node, str], str]  # temporary's name, node, expression -> a line
    iota: Callable[[fx.Node, str], str]  # iota node, its index (C syntax) -> its value
    literal: Callable[[Any, torch.dtype], str]
    integer: Callable[[str], str]  # a value used as an index (a gather's)


CPP = Dialect(
    expression=expression,
    scalar_operand=scalar_operand,
    load=lambda slot, offset: f"b{slot}[{offset}]",
    statement=lambda name, node, expr: f"const {ctype_of(dtype_of(node), packet_name(node))} {name} = {expr};",
    iota=lambda node, i: (
        f"(({ctype_of(dtype_of(node))})({node.kwargs.get('start', 0)} + {i} * {node.kwargs.get('step', 1)}))"
    ),
    literal=literal,
    integer=lambda v: f"((int64_t){v})",
)


@dataclass
class Reader:
    """Builds the statements that read graph values inside one loop body."""

    sched: Schedule
    reads: set[int] = field(default_factory=set)
    loads: set[tuple[int, str]] = field(default_factory=set)  # (slot, offset) of every load
    lines: list[str] = field(default_factory=list)
    cache: dict[tuple[fx.Node, tuple[str, ...]], str] = field(default_factory=dict)
    dialect: Dialect = CPP

    def fresh(self) -> Reader:
        """A reader for another loop body of the same step (same buffers, no statements)."""
        return Reader(self.sched, self.reads, self.loads, dialect=self.dialect)

    def value(self, node: Any, idx: list[str], flat: str | None = None) -> str:
        """``node`` read at index tuple ``idx``; ``flat``, when given, is the tuple's row-major
        offset in ``node``'s shape (carried through order-keeping views, so loads need no div/mod)."""
        if not isinstance(node, fx.Node):
            raise Unsupported(f"a non-tensor value {node!r} where a tensor was expected")
        key = (node, ("flat", flat) if flat is not None else tuple(idx))
        if key in self.cache:
            return self.cache[key]
        expr = self._expr(node, idx, flat)
        if kind_of(node) == "view" and node not in self.sched.buffers:
            return expr  # a view is its source read elsewhere: no statement of its own
        name = f"t{len(self.cache)}"
        self.lines.append(self.dialect.statement(name, node, expr))
        self.cache[key] = name
        return name

    def _expr(self, node: fx.Node, idx: list[str], flat: str | None) -> str:
        say = self.dialect
        if node in self.sched.buffers:
            slot = self.sched.slot(node)
            offset = flat if flat is not None else linear(idx, shape_of(node))
            self.reads.add(slot)
            self.loads.add((slot, offset))
            return say.load(slot, offset)
        name, kind = packet_name(node), kind_of(node)
        if kind == "view":
            src = node.args[0]
            return self.value(src, source_index(node, idx), flat if keeps_order(node) else None)
        if kind == "pointwise":
            shape = shape_of(node)
            ops = []
            for arg in node.args[: _arity(name)]:
                if isinstance(arg, fx.Node):
                    same = shape_of(arg) == shape
                    ops.append(self.value(arg, idx if same else _scalar_idx(arg, node), flat if same else None))
                else:
                    ops.append(say.scalar_operand(arg, node))
            return say.expression(node, ops)
        if name == "aten.gather":
            src, dim, index = node.args[0], int_arg(node, 1), node.args[2]
            at = self.value(index, idx)
            dim %= len(idx)
            return self.value(src, [*idx[:dim], say.integer(at), *idx[dim + 1 :]])
        if name == "prims.iota":  # iota(length, *, start, step, dtype, ...)
            return say.iota(node, idx[0])
        if name in ("aten.full", "prims.full"):
            return say.literal(node.args[1], dtype_of(node))
        raise Unsupported(f"{name}: not a node the lowering reads inline")


_BINARY_NAMES = frozenset(
    f"prims.{n}"
    for n in (
        "add",
        "sub",
        "mul",
        "div",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "pow",
        "maximum",
        "minimum",
        "bitwise_or",
        "bitwise_and",
        "bitwise_xor",
        "fmod",
        "atan2",
        "remainder",
    )
)


def _arity(name: str) -> int:
    """How many leading arguments are values (the rest are dtypes or options)."""
    return 3 if name == "prims.where" else (2 if name in _BINARY_NAMES else 1)


def _scalar_idx(arg: fx.Node, node: fx.Node) -> list[str]:
    if shape_of(arg) != ():
        raise Unsupported(f"{packet_name(node)}: operands of different shapes without a broadcast")
    return []


def _decls(sched: Schedule, reads: set[int], writes: dict[int, str]) -> str:
    """The buffer pointers a step uses, typed (``writes``: slot -> name of the output pointer)."""
    by_slot = {slot: node for node, slot in sched.buffers.items()}
    out = []
    for slot in sorted(reads - set(writes)):
        ct = ctype_of(dtype_of(by_slot[slot]))
        out.append(f"    const {ct}* __restrict__ b{slot} = (const {ct}*)b[{slot}];\n")
    for slot, name in writes.items():
        ct = ctype_of(dtype_of(by_slot[slot]))
        out.append(f"    {ct}* __restrict__ {name} = ({ct}*)b[{slot}];\n")
    return "".join(out)


def _delinear_lines(var: str, names: list[str], shape: list[int], indent: str) -> str:
    """Statements setting ``names`` (row-major) from the flat index ``var``."""
    out, rest = [], var
    for k in range(len(shape) - 1, -1, -1):
        if k == 0:
            out.append(f"{indent}const int64_t {names[k]} = {rest};\n")
        else:
            out.append(f"{indent}const int64_t {names[k]} = {rest} % {shape[k]};\n")
            out.append(f"{indent}const int64_t q{names[k]} = {rest} / {shape[k]};\n")
            rest = f"q{names[k]}"
    return "".join(out)


_STATEMENT = re.compile(r"^const [\w:]+ (t\d+) = (.*);$")


def split_invariant(lines: list[str], var: str) -> tuple[list[str], list[str]]:
    """``lines`` (in dependency order) split into those that do not depend on the loop variable
    ``var`` (computed once, before the loop) and those that do. Hoisting is not only cheaper:
    GCC left a loop scalar ("control flow in loop") when it unswitched a select on a value that
    was invariant in it (an L2 normalisation's clamped norm ran 8x slower than eager)."""
    outside: list[str] = []
    inside: list[str] = []
    variant: set[str] = set()
    uses_var = re.compile(rf"\b{re.escape(var)}\b")
    for line in lines:
        m = _STATEMENT.match(line)
        temps = set(re.findall(r"\bt\d+\b", m.group(2))) if m else set()
        if m and not uses_var.search(m.group(2)) and not temps & variant:
            outside.append(line)
        else:
            inside.append(line)
            if m:
                variant.add(m.group(1))
    return outside, inside


def simd_loop(var: str, lo: str, hi: str, lines: list[str], indent: str, clause: str = "") -> str:
    """A block: the invariant statements, then ``#pragma omp simd`` over ``var`` in [lo, hi)."""
    outside, inside = split_invariant(lines, var)
    ind = indent + "    "
    return (
        f"{indent}{{\n{_body(outside, ind)}{ind}#pragma omp simd{clause}\n"
        f"{ind}for (int64_t {var} = {lo}; {var} < {hi}; ++{var}) {{\n{_body(inside, ind + '    ')}{ind}}}\n{indent}}}\n"
    )


def _body(lines: list[str], indent: str) -> str:
    return "".join(f"{indent}{line}\n" for line in lines)


def threads_clause(cfg: dict[str, Any]) -> str:
    threads = int(cfg.get("threads") or 0)
    return f" num_threads({threads})" if threads > 0 else ""


MERGE_BELOW = 1024  # trailing dims are merged into the SIMD loop until it runs at least this long


def _merged_split(shape: list[int]) -> int:
    """The first dim of the SIMD loop's run: trailing dims shorter than MERGE_BELOW together are
    one loop (GroupNorm's 64x64 planes: a 64-long loop per task spent its time in task overhead)."""
    k, run = len(shape) - 1, shape[-1]
    while k > 0 and run < MERGE_BELOW:
        k -= 1
        run *= shape[k]
    return k


def pointwise_step(name: str, node: fx.Node, sched: Schedule, cfg: dict[str, Any]) -> str:
    """A step writing ``node`` (inlined from its inputs) into its buffer."""
    shape = list(shape_of(node)) or [1]
    split = _merged_split(shape)
    outer_names = [f"i{k}" for k in range(split)]
    inner, outer = math.prod(shape[split:]), math.prod(shape[:split])
    # the merged dims' indices from the loop variable f (what a load through a view needs); a load
    # in row-major order uses the flat offset, in which f appears as it is: a contiguous SIMD load
    idx = [*outer_names, *delinear("f", shape[split:])] if shape_of(node) else []
    flat = linear([*outer_names, *["0"] * (len(shape) - split)], shape) if shape_of(node) else "0"
    flat = "f" if flat == "0" else f"{flat} + f"
    # the node has a buffer (the one this step writes): read its definition, not the buffer
    reader = Reader(_without(sched, node))
    value = reader.value(node, idx, flat if shape_of(node) else "0")
    chunk = int(cfg.get("chunk", 4096))
    head = _delinear_lines("o", outer_names, shape[:split], "        ")
    decls = _decls(sched, reader.reads, {sched.slot(node): "y"})
    store = f"y[{flat if shape_of(node) else '0'}] = {value};"
    return f"""
static void {name}(void** b) {{
{decls}    const int64_t nch = {outer} >= {SPLIT_BELOW} ? 1 : ({inner} + {chunk - 1}) / {chunk};
    const int64_t ch = ({inner} + nch - 1) / nch;
    #pragma omp parallel for schedule(static){threads_clause(cfg)}
    for (int64_t task = 0; task < {outer} * nch; ++task) {{
        const int64_t o = task / nch;
        const int64_t c0 = (task % nch) * ch;
        const int64_t c1 = c0 + ch < {inner} ? c0 + ch : {inner};
{head}{simd_loop("f", "c0", "c1", [*reader.lines, store], "        ")}    }}
}}
"""


def _without(sched: Schedule, node: fx.Node) -> Schedule:
    """``sched`` with ``node`` not a buffer, so that reading it inlines its definition."""
    return Schedule(sched.inputs, {n: s for n, s in sched.buffers.items() if n is not node}, sched.steps)
