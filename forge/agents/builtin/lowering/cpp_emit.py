"""C++ for the lowering's pointwise and reduction steps.

A step is one OpenMP-parallel loop nest; its values are read by ``reader.Reader`` in the C++
dialect (``CPP``), and its code written into a ``code.CodeBuffer``.

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
from collections.abc import Sequence
from typing import Any

from torch import fx

from forge.agents.builtin.lowering.code import CodeBuffer, Statement, delinear_into, hoist
from forge.agents.builtin.lowering.cpp_expr import expression, scalar_operand
from forge.agents.builtin.lowering.ir import (
    Unsupported,
    clamp_index,
    ctype_of,
    delinear,
    dtype_of,
    linear,
    literal,
    shape_of,
)
from forge.agents.builtin.lowering.layout import storage_index, storage_shape
from forge.agents.builtin.lowering.reader import Dialect, Reader, without_buffer
from forge.agents.builtin.lowering.schedule import Schedule
from forge.agents.builtin.lowering.trace import packet_name

SPLIT_BELOW = 64  # fewer outer blocks than this: the inner loop is split into chunks across threads


def _offset(offset: str, numel: int) -> str:
    """A load's offset. One that divides or takes a remainder (an interleaved or strided view) is
    computed in 32 bits where the buffer allows: GCC 12 vectorised such a loop with gathers only
    then ("data ref analysis failed" on the 64-bit offset; a rotary embedding ran scalar, 0.5x eager)."""
    if numel < 2**31 and ("/" in offset or "%" in offset):
        return f"(int32_t)({offset})"
    return offset


CPP = Dialect(
    expression=expression,
    scalar_operand=scalar_operand,
    load=lambda slot, offset, numel: f"b{slot}[{_offset(offset, numel)}]",
    statement=lambda name, node, expr: f"const {ctype_of(dtype_of(node), packet_name(node))} {name} = {expr};",
    iota=lambda node, i: (
        f"(({ctype_of(dtype_of(node))})({node.kwargs.get('start', 0)} + {i} * {node.kwargs.get('step', 1)}))"
    ),
    literal=literal,
    integer=lambda v: f"((int64_t){v})",
    select=lambda cond, a, b: f"({cond} ? {a} : {b})",
    clamp=lambda e, low, high: clamp_index(e, low, high, "std::max<int64_t>", "std::min<int64_t>"),
)


def cpp_reader(sched: Schedule) -> Reader:
    return Reader(sched, CPP)


def pointer_decls(code: CodeBuffer, sched: Schedule, reads: set[int], writes: dict[int, str]) -> None:
    """The buffer pointers a step uses, typed (``writes``: slot -> name of the output pointer). A
    value written over the library result it reads (``Schedule.overwrites``) is read and written
    through two pointers to one buffer, so neither is ``__restrict__``."""
    by_slot = {slot: node for node, slot in sched.buffers.items()}
    shared = {sched.buffers[source] for source in sched.overwrites.values()} & reads & set(writes)
    for slot in sorted(reads):
        if slot in writes and (slot not in shared or writes[slot] == f"b{slot}"):
            continue  # read through the output pointer itself
        ct = ctype_of(dtype_of(by_slot[slot]))
        restrict = "" if slot in shared else " __restrict__"
        code.line(f"const {ct}*{restrict} b{slot} = (const {ct}*)b[{slot}];")
    for slot, name in writes.items():
        ct = ctype_of(dtype_of(by_slot[slot]))
        restrict = "" if slot in shared else " __restrict__"
        code.line(f"{ct}*{restrict} {name} = ({ct}*)b[{slot}];")


def step_function(name: str, sched: Schedule, reads: set[int], writes: dict[int, str], body: CodeBuffer) -> str:
    """A step's C++ function, ``static void name(void** b)``: the buffer pointers it uses, then
    ``body`` (written first, so that its reader knows which buffers it read)."""
    code = CodeBuffer()
    code.line("")
    with code.block(f"static void {name}(void** b)"):
        pointer_decls(code, sched, reads, writes)
        code.splice(body)
    return code.text()


def simd_loop(code: CodeBuffer, var: str, lo: str, hi: str, body: Sequence[Statement], clause: str = "") -> None:
    """A block: the statements of ``body`` that do not depend on ``var`` (``code.hoist``), then
    ``#pragma omp simd`` over ``var`` in [lo, hi) around the rest."""
    outside, inside = hoist(body, var)
    with code.block():
        code.lines(outside)
        code.line(f"#pragma omp simd{clause}")
        with code.block(f"for (int64_t {var} = {lo}; {var} < {hi}; ++{var})"):
            code.lines(inside)


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
    """A step writing ``node`` (inlined from its inputs) into its buffer, in the order the buffer
    stores it (``layout``): the loops run over the stored dims, so the store is contiguous. A step
    that reads a buffer of its shape stored in another order transposes (``_transposing_step``)."""
    perm = sched.layouts.get(sched.slot(node))
    logical = list(shape_of(node)) or [1]
    across = _read_in_another_order(node, sched, perm)
    if across is not None and shape_of(node):
        return _transposing_step(name, node, sched, cfg, perm, across)
    dims = list(perm) if perm is not None else list(range(len(logical)))
    shape = storage_shape(logical, perm)
    split = _merged_split(shape)
    outer_names = [f"i{d}" for d in dims[:split]]
    inner = math.prod(shape[split:])
    # the merged dims' indices from the loop variable f (what a load through a view needs); a load
    # in the stored order uses the flat offset, in which f appears as it is: a contiguous SIMD load
    stored = [*outer_names, *delinear("f", shape[split:])]
    idx = [stored[dims.index(d)] for d in range(len(logical))] if shape_of(node) else []
    flat = linear([*outer_names, *["0"] * (len(shape) - split)], shape) if shape_of(node) else "0"
    flat = "f" if flat == "0" else f"{flat} + f"
    # the node has a buffer (the one this step writes): read its definition, not the buffer
    reader = Reader(without_buffer(sched, node), CPP, order=perm)
    value = reader.value(node, idx, flat if shape_of(node) else "0")
    store = Statement(f"y[{flat if shape_of(node) else '0'}] = {value};")
    code = chunked_loop(outer_names, shape[:split], inner, "f", [*reader.lines, store], cfg)
    return step_function(name, sched, reader.reads, {sched.slot(node): "y"}, code)


def _read_in_another_order(node: fx.Node, sched: Schedule, perm: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """The storage order of a buffer of ``node``'s shape that its value reads, stored otherwise
    than ``node``'s buffer (row-major as the identity), or None when there is none."""
    shape, seen = shape_of(node), set()
    stack = list(node.all_input_nodes)
    while stack:
        arg = stack.pop()
        if arg in seen:
            continue
        seen.add(arg)
        if arg in sched.buffers:
            stored = sched.layouts.get(sched.slot(arg))
            if shape_of(arg) == shape and stored != perm:
                return stored if stored is not None else tuple(range(len(shape)))
            continue
        stack.extend(arg.all_input_nodes)
    return None


def _transposing_step(
    name: str,
    node: fx.Node,
    sched: Schedule,
    cfg: dict[str, Any],
    perm: tuple[int, ...] | None,
    across: tuple[int, ...],
) -> str:
    """A pointwise step between two storage orders (a channels-last convolution's result read
    into the row-major output, or an input made channels-last), in tiles that keep both
    buffers' cache lines in L1: per task a block of ``TILE`` rows of the dim stored just outside
    the other buffer's innermost; in it, that innermost dim, then the rows, then a SIMD loop
    along the written buffer's innermost dim. Per-channel values (a batch norm's scale) are
    computed once per channel and tile. The loop in the written order alone read a channels-last
    8x32x32x32 result in 0.10 ms; the same pass row-major took 0.02."""
    logical = list(shape_of(node))
    inner = perm[-1] if perm is not None else len(logical) - 1
    middle = across[-1]
    rest = [d for d in across if d not in (inner, middle)]
    if middle == inner or not rest:
        raise Unsupported("a transposing step needs a dim on each side of the two innermost")
    rows, tasks = rest[-1], rest[:-1]
    idx = [f"i{d}" if d != inner else "f" for d in range(len(logical))]
    reader = Reader(without_buffer(sched, node), CPP, order=perm)
    value = reader.value(node, idx)
    store = Statement(f"y[{linear(storage_index(idx, perm), storage_shape(logical, perm))}] = {value};")
    body = [*reader.lines, store]
    # before the rows' loop: values that depend on neither the rows nor the SIMD loop, in order
    per_tile = [st for st in body if st.uses is not None and not {f"i{rows}", "f"} & st.uses]
    per_row = [st for st in body if st not in per_tile]
    blocks = -(-logical[rows] // TILE)
    code = CodeBuffer()
    code.line(f"#pragma omp parallel for schedule(static){threads_clause(cfg)}")
    with code.block(f"for (int64_t task = 0; task < {math.prod(logical[d] for d in tasks)} * {blocks}; ++task)"):
        code.line(f"const int64_t o = task / {blocks};")
        code.line(f"const int64_t r0 = (task % {blocks}) * {TILE};")
        code.line(f"const int64_t r1 = r0 + {TILE} < {logical[rows]} ? r0 + {TILE} : {logical[rows]};")
        delinear_into(code, "o", [f"i{d}" for d in tasks], [logical[d] for d in tasks])
        with code.block(f"for (int64_t i{middle} = 0; i{middle} < {logical[middle]}; ++i{middle})"):
            code.lines(per_tile)
            with code.block(f"for (int64_t i{rows} = r0; i{rows} < r1; ++i{rows})"):
                simd_loop(code, "f", "0", str(logical[inner]), per_row)
    return step_function(name, sched, reader.reads, {sched.slot(node): "y"}, code)


TILE = 8  # rows per transposing task: 8 rows of a 32-channel image are 16 KiB, within L1


def chunked_loop(
    outer_names: list[str], outer_shape: list[int], inner: int, var: str, body: Sequence[Statement], cfg: dict[str, Any]
) -> CodeBuffer:
    """One parallel task per outer index (``outer_names`` over ``outer_shape``), the SIMD loop
    over ``var`` in [0, inner) around ``body``, split into chunks when there are too few outer
    blocks to keep every thread busy."""
    outer, chunk = math.prod(outer_shape), int(cfg.get("chunk", 4096))
    code = CodeBuffer()
    code.line(f"const int64_t nch = {outer} >= {SPLIT_BELOW} ? 1 : ({inner} + {chunk - 1}) / {chunk};")
    code.line(f"const int64_t ch = ({inner} + nch - 1) / nch;")
    code.line(f"#pragma omp parallel for schedule(static){threads_clause(cfg)}")
    with code.block(f"for (int64_t task = 0; task < {outer} * nch; ++task)"):
        code.line("const int64_t o = task / nch;")
        code.line("const int64_t c0 = (task % nch) * ch;")
        code.line(f"const int64_t c1 = c0 + ch < {inner} ? c0 + ch : {inner};")
        delinear_into(code, "o", outer_names, outer_shape)
        simd_loop(code, var, "c0", "c1", body)
    return code
