"""Triton kernels for the lowering's pointwise and reduction steps (CUDA devices), read from the
same schedule and index algebra as the C++ steps (``reader.Reader`` in the Triton dialect).

- pointwise: one program per ``block`` output elements, the flat index delinearised into the
  output's index tuple; order-keeping views load at the flat offset itself (no div/mod);
- reduction over any set of axes: a 2-d tile of ``xblock`` outputs by ``rblock`` reduced elements,
  looped over the reduced elements, accumulated per lane and reduced across the tile at the end
  (sum, prod, amax, amin; var as two passes: the mean, then the squared deviations, as torch).
  max/min keep a NaN flag beside the accumulator, so a NaN anywhere gives NaN as in torch.

Each writer returns the kernel's source and the line of ``forward`` that launches it.
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.code import CodeBuffer
from forge.agents.builtin.lowering.cpp_reduce import Reduction, reduction_of
from forge.agents.builtin.lowering.ir import clamp_index, delinear, dtype_of, is_float, shape_of
from forge.agents.builtin.lowering.reader import Dialect, Reader, without_buffer
from forge.agents.builtin.lowering.schedule import Schedule
from forge.agents.builtin.lowering.trace import packet_name
from forge.agents.builtin.lowering.triton_expr import expression, index, scalar_operand, tl_literal, tl_type


def _load(slot: int, offset: str, numel: int) -> str:
    if re.search(r"[A-Za-z_]", offset) is None:  # a constant offset (a 0-d value): one scalar load
        return f"tl.load(b{slot} + {offset})"
    return f"tl.load(b{slot} + ({index(offset)}), mask=mask, other=0)"


TRITON = Dialect(
    expression=expression,
    scalar_operand=scalar_operand,
    load=_load,
    statement=lambda name, node, expr: f"{name} = {expr}",
    iota=lambda node, i: (
        f"({node.kwargs.get('start', 0)} + ({index(i)}) * {node.kwargs.get('step', 1)})"
        f".to({tl_type(dtype_of(node), packet_name(node))})"
    ),
    literal=tl_literal,
    integer=lambda v: f"({v}).to(tl.int64)",
    select=lambda cond, a, b: f"tl.where({index(cond)}, {a}, {b})",
    clamp=lambda e, low, high: clamp_index(e, low, high, "tl.maximum", "tl.minimum"),
)


def _pow2(n: int) -> int:
    return 1 << max(0, (max(1, n) - 1).bit_length())


def _launch(name: str, grid: int, reads: set[int], out: int, cfg: dict[str, Any], consts: str) -> str:
    args = "".join(f"b[{s}], " for s in sorted(reads))
    return f"{name}[({grid},)]({args}b[{out}], {consts}, num_warps={int(cfg.get('num_warps', 4))})"


def pointwise_kernel(name: str, node: fx.Node, sched: Schedule, cfg: dict[str, Any]) -> tuple[str, str]:
    """The kernel writing ``node`` (inlined from its inputs) into its buffer, and its launch."""
    shape = list(shape_of(node))
    n = math.prod(shape)
    block = min(int(cfg.get("block", 1024)), _pow2(n))
    reader = Reader(without_buffer(sched, node), TRITON)
    value = reader.value(node, delinear("f", shape) if shape else [], "f" if shape else "0")
    params = "".join(f"b{s}, " for s in sorted(reader.reads))
    code = CodeBuffer()
    code.line("")
    code.line("@triton.jit")
    code.line(f"def {name}({params}y, N, BLOCK: tl.constexpr):")
    with code.indented():
        code.line("f = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)")
        code.line("mask = f < N")
        code.lines(reader.lines)
        code.line(f"tl.store(y + f, {value}, mask=mask)")
    grid = -(-n // block)
    return code.text(), _launch(name, grid, reader.reads, sched.slot(node), cfg, f"{n}, BLOCK={block}")


def _acc_type(node: fx.Node, x: fx.Node, red: Reduction, cfg: dict[str, Any]) -> torch.dtype:
    if red.op in ("amax", "amin"):
        return torch.int32 if dtype_of(x) == torch.bool else dtype_of(x)
    if is_float(dtype_of(node)):
        wide = cfg.get("acc", "float32") == "float64" or dtype_of(node) == torch.float64
        return torch.float64 if wide else torch.float32
    return torch.int64


def _neutral(red: Reduction, acc: torch.dtype) -> str:
    """The value a masked-off lane holds: it changes no result."""
    if red.op in ("sum", "var"):
        return "0"
    if red.op == "prod":
        return "1"
    if is_float(acc):
        return tl_literal(float("-inf") if red.op == "amax" else float("inf"), acc)
    info = torch.iinfo(acc)
    return str(info.min if red.op == "amax" else info.max)


def _fold(red: Reduction, v: str, acc_t: str, neutral: str, second: bool) -> list[str]:
    """Lines folding the tile's values ``v`` into ``acc`` (and the NaN flag)."""
    if red.op == "var" and second:
        return [f"d = tl.where(mask, {v}.to({acc_t}) - mean[:, None], 0.0)", "acc += d * d"]
    v = f"tl.where(mask, {v}.to({acc_t}), {neutral})"
    if red.op in ("sum", "var"):
        return [f"acc += {v}"]
    if red.op == "prod":
        return [f"acc *= {v}"]
    op = "tl.maximum" if red.op == "amax" else "tl.minimum"
    return [f"v = {v}", f"acc = {op}(acc, v)", "nanf = nanf | (v != v)"]


def _pass(
    code: CodeBuffer, reader: Reader, x: fx.Node, idx: list[str], red: Reduction, acc_t: str, neutral: str, second: bool
) -> None:
    """One pass over the reduced elements, tile by tile, folding them into ``acc``."""
    v = reader.value(x, idx)
    code.line(f"acc = tl.full([XBLOCK, RBLOCK], {neutral}, {acc_t})")
    code.line("for r0 in range(0, R, RBLOCK):")
    with code.indented():
        code.line("r = r0 + tl.arange(0, RBLOCK)[None, :]")
        code.line("mask = xmask & (r < R)")
        code.lines(reader.lines)
        code.lines(_fold(red, v, acc_t, neutral, second))


def _result(red: Reduction, n: int, floats: bool) -> str:
    if red.op == "prod":
        res = "tl.reduce(acc, 1, _mul)"
    elif red.op in ("amax", "amin"):
        res = f"tl.{'max' if red.op == 'amax' else 'min'}(acc, 1)"
        if floats:
            res = f'tl.where(tl.max(nanf.to(tl.int32), 1) > 0, float("nan"), {res})'
    elif red.op == "var":
        res = f"tl.sum(acc, 1) / ({n} - {red.correction!r})"
    else:
        res = "tl.sum(acc, 1)"
    return res


def reduce_kernel(name: str, node: fx.Node, sched: Schedule, cfg: dict[str, Any]) -> tuple[str, str]:
    """The kernel reducing ``node``'s input over its axes into ``node``'s buffer, and its launch."""
    red = reduction_of(node)
    x = node.args[0]
    assert isinstance(x, fx.Node)
    xshape = list(shape_of(x)) or [1]
    dims = red.dims if shape_of(x) else (0,)
    kept = [d for d in range(len(xshape)) if d not in dims]
    m = math.prod(xshape[d] for d in kept)
    r = math.prod(xshape[d] for d in dims)
    out_idx = iter(delinear("xo", [xshape[d] for d in kept]))
    red_idx = iter(delinear("r", [xshape[d] for d in dims]))
    idx = [next(red_idx) if d in dims else next(out_idx) for d in range(len(xshape))]
    if not shape_of(x):
        idx = []
    acc = _acc_type(node, x, red, cfg)
    acc_t, neutral = tl_type(acc), _neutral(red, acc)
    floats = is_float(dtype_of(x))
    reader = Reader(sched, TRITON)
    passes = CodeBuffer(level=1)
    if red.op in ("amax", "amin"):
        passes.line("nanf = tl.zeros([XBLOCK, RBLOCK], tl.int1)")
    if red.op == "var":
        _pass(passes, reader, x, idx, red, acc_t, neutral, False)
        passes.line(f"mean = tl.sum(acc, 1) / {r}")
        reader = reader.fresh()
    _pass(passes, reader, x, idx, red, acc_t, neutral, red.op == "var")
    rblock = min(int(cfg.get("rblock", 1024)), _pow2(r))
    xblock = max(1, min(_pow2(m), int(cfg.get("block", 1024)) // rblock))
    params = "".join(f"b{s}, " for s in sorted(reader.reads))
    out_t = tl_type(dtype_of(node), packet_name(node))
    code = CodeBuffer()
    code.line("")
    code.line("@triton.jit")
    code.line(f"def {name}({params}y, M, R, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):")
    with code.indented():
        code.line("xs = tl.program_id(0).to(tl.int64) * XBLOCK + tl.arange(0, XBLOCK)")
        code.line("xo = xs[:, None]")
        code.line("xmask = xo < M")
    code.splice(passes)
    with code.indented():
        code.line(f"tl.store(y + xs, ({_result(red, r, floats)}).to({out_t}), mask=xs < M)")
    source = code.text()
    consts = f"{m}, {r}, XBLOCK={xblock}, RBLOCK={rblock}"
    return source, _launch(name, -(-m // xblock), reader.reads, sched.slot(node), cfg, consts)
