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
from forge.agents.builtin.lowering.ir import clamp_index, ctype_of, delinear, dtype_of, linear, literal, shape_of
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
    """A step writing ``node`` (inlined from its inputs) into its buffer."""
    shape = list(shape_of(node)) or [1]
    split = _merged_split(shape)
    outer_names = [f"i{k}" for k in range(split)]
    inner = math.prod(shape[split:])
    # the merged dims' indices from the loop variable f (what a load through a view needs); a load
    # in row-major order uses the flat offset, in which f appears as it is: a contiguous SIMD load
    idx = [*outer_names, *delinear("f", shape[split:])] if shape_of(node) else []
    flat = linear([*outer_names, *["0"] * (len(shape) - split)], shape) if shape_of(node) else "0"
    flat = "f" if flat == "0" else f"{flat} + f"
    # the node has a buffer (the one this step writes): read its definition, not the buffer
    reader = cpp_reader(without_buffer(sched, node))
    value = reader.value(node, idx, flat if shape_of(node) else "0")
    store = Statement(f"y[{flat if shape_of(node) else '0'}] = {value};")
    code = chunked_loop(outer_names, shape[:split], inner, "f", [*reader.lines, store], cfg)
    return step_function(name, sched, reader.reads, {sched.slot(node): "y"}, code)


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
