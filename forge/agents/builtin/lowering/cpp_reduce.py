"""C++ for the lowering's reduction steps: sum, prod, amax, amin and var over any set of axes.

Three loop shapes (see ``cpp_emit``): the last axis reduced (a parallel task per output, a SIMD
reduction over the last axis), every axis reduced (the parallel loop reduces too), or the last
axis kept (per task a chunk of accumulators over it, updated by a SIMD loop per reduced index).
var is two passes (the mean, then the squared deviations), as torch computes it. max/min keep a
NaN flag beside the accumulator, so a NaN anywhere gives NaN as in torch, and the SIMD loop stays
a plain max/min.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.code import CodeBuffer, Statement, delinear_into
from forge.agents.builtin.lowering.cpp_emit import SPLIT_BELOW, cpp_reader, simd_loop, step_function, threads_clause
from forge.agents.builtin.lowering.ir import ctype_of, dtype_of, int_list, is_float, linear, shape_of
from forge.agents.builtin.lowering.reader import Reader
from forge.agents.builtin.lowering.schedule import Schedule
from forge.agents.builtin.lowering.trace import packet_name


@dataclass(frozen=True)
class Reduction:
    op: str  # sum | prod | amax | amin | var
    dims: tuple[int, ...]  # reduced axes of the input, sorted
    correction: float = 0.0  # var's


def reduction_of(node: fx.Node) -> Reduction:
    name, x = packet_name(node), node.args[0]
    assert isinstance(x, fx.Node)
    nd = len(shape_of(x))
    if name in ("aten.max", "aten.min"):
        return Reduction("amax" if name == "aten.max" else "amin", tuple(range(nd)))
    dims = tuple(sorted({d % nd for d in int_list(node, 1)})) if nd else ()
    op = name.split(".")[1]
    correction = float(node.args[2]) if op == "var" else 0.0  # type: ignore[arg-type]
    return Reduction(op, dims, correction)


# The longest float32 sum or var over the last axis a float accumulator is tried first for: the
# SIMD loop keeps 8-16 partial sums, each adding at most 2048 values, so the rounding stays near
# 1e-5 of the sum of magnitudes typically, as eager's own float accumulation. With the last axis
# kept, each accumulator adds its values one after another (a weight's gradient summed over 1024
# rows read 2.7e-4 off eager's where the sum cancelled): those, and longer sums, start in double.
# The tuner still tries float, and the verifier, not this guess, decides whether it passes.
FLOAT_ACC_MAX = 16384


def float_acc_first(reductions: list[fx.Node]) -> bool:
    """Whether the ``acc`` knob should offer float first for these reduction nodes: every float
    sum and var among them is float32, over the last axis and at most ``FLOAT_ACC_MAX`` long."""
    for node in reductions:
        red = reduction_of(node)
        x = node.args[0]
        assert isinstance(x, fx.Node)
        if red.op in ("amax", "amin") or not is_float(dtype_of(node)):
            continue  # max/min accumulate in the input's type, integer sums in int64: acc is not theirs
        shape = shape_of(x) or (1,)
        over_last = not shape_of(x) or len(shape) - 1 in red.dims
        if dtype_of(node) != torch.float32 or not over_last or math.prod(shape[d] for d in red.dims) > FLOAT_ACC_MAX:
            return False
    return True


def _acc_type(node: fx.Node, red: Reduction, cfg: dict[str, Any]) -> str:
    x = node.args[0]
    assert isinstance(x, fx.Node)
    if red.op in ("amax", "amin"):
        return ctype_of(dtype_of(x))
    if is_float(dtype_of(node)):
        return "double" if cfg.get("acc", "double") == "double" or dtype_of(node) == torch.float64 else "float"
    return "int64_t"


def first_pass_sum(node: fx.Node, var: fx.Node, cfg: dict[str, Any]) -> bool:
    """Whether the sum ``node`` is exactly the first pass of the var ``var`` (its mean's
    accumulator before the division): the same input node, axes and accumulator type, so the
    same additions in the same order."""
    a, b = reduction_of(node), reduction_of(var)
    if a.op != "sum" or b.op != "var" or node.args[0] is not var.args[0] or a.dims != b.dims:
        return False
    return _acc_type(node, a, cfg) == _acc_type(var, b, cfg)


def _init(red: Reduction, acc: str) -> str:
    if red.op in ("sum", "var"):
        return "0"
    if red.op == "prod":
        return "1"
    big = "INFINITY" if acc in ("float", "double") else f"std::numeric_limits<{acc}>::max()"
    low = "(-INFINITY)" if acc in ("float", "double") else f"std::numeric_limits<{acc}>::lowest()"
    return low if red.op == "amax" else big


def _update(red: Reduction, acc: str, v: str, floats: bool, second: bool) -> list[str]:
    """Statements folding value ``v`` into accumulator ``acc`` (and flag ``nan``)."""
    if red.op == "var" and second:
        return [f"{{ const ACC_T d = (ACC_T)({v}) - mean; {acc} += d * d; }}"]
    if red.op in ("sum", "var"):
        return [f"{acc} += {v};"]
    if red.op == "prod":
        return [f"{acc} *= {v};"]
    op = ">" if red.op == "amax" else "<"
    lines = [f"{acc} = {v} {op} {acc} ? {v} : {acc};"]
    return lines + ([f"NAN_FLAG |= ({v} != {v});"] if floats else [])


def _omp_op(red: Reduction) -> str:
    return {"sum": "+", "var": "+", "prod": "*", "amax": "max", "amin": "min"}[red.op]


def reduce_step(name: str, node: fx.Node, sched: Schedule, cfg: dict[str, Any]) -> str:
    red = reduction_of(node)
    x = node.args[0]
    assert isinstance(x, fx.Node)
    shape = list(shape_of(x)) or [1]
    nd = len(shape)
    dims = red.dims if shape_of(x) else (0,)
    if nd - 1 in dims:
        return _inner(name, node, x, red, dims, shape, sched, cfg)
    return _outer(name, node, x, red, dims, shape, sched, cfg)


def _finish(red: Reduction, acc: str, n: int, out_ct: str, floats: bool, flag: str) -> str:
    if red.op == "var":
        return f"({out_ct})({acc} / (ACC_T)({n} - {red.correction!r}))"
    if red.op in ("amax", "amin") and floats:
        return f"({flag} ? ({out_ct})NAN : ({out_ct}){acc})"
    return f"({out_ct}){acc}"


def _pass_lines(
    reader: Reader, x: fx.Node, idx: list[str], red: Reduction, acc: str, second: bool, stash_to: str | None = None
) -> list[Statement]:
    flat = linear(idx, shape_of(x)) if idx else "0"
    v = reader.value(x, idx, flat)
    stored = [Statement(f"{stash_to}[{flat}] = {v};")] if stash_to else []
    return [*reader.lines, *stored, *(Statement(line) for line in _update(red, acc, v, is_float(dtype_of(x)), second))]


def row_block(
    node: fx.Node,
    reader: Reader,
    cfg: dict[str, Any],
    out: str,
    code: CodeBuffer,
    acc_t_name: str,
    stash_to: str | None = None,
) -> str:
    """Write into ``code`` the statements reducing ``node``'s input over its reduced axes, for the
    kept indices the enclosing loop has set (``i<k>``), storing the result at ``out[<kept
    offset>]``; the accumulator's type is named ``acc_t_name``. Returns that type (C++). For the
    last axis reduced with some axis kept. ``stash_to``: an array the input's values are also
    stored in, at their own offsets, as the first pass reads them."""
    red = reduction_of(node)
    x = node.args[0]
    assert isinstance(x, fx.Node)
    shape = list(shape_of(x))
    nd = len(shape)
    names = [f"i{k}" for k in range(nd)]
    kept = [k for k in range(nd) if k not in red.dims]
    mid = [k for k in red.dims if k != nd - 1]
    acc_t, floats = _acc_type(node, red, cfg), is_float(dtype_of(x))
    n = math.prod(shape[k] for k in red.dims)
    passes = 2 if red.op == "var" else 1
    bodies = [
        _pass_lines(reader.fresh(), x, names, red, "acc" if p == 0 else "acc2", p == 1, stash_to if p == 0 else None)
        for p in range(passes)
    ]
    if acc_t_name != "ACC_T":
        bodies = [[Statement(s.line.replace("ACC_T", acc_t_name), s.uses) for s in b] for b in bodies]
    flag = " reduction(|:NAN_FLAG)" if floats and red.op in ("amax", "amin") else ""
    omp = _omp_op(red)
    lin_out = linear([names[k] for k in kept], [shape[k] for k in kept])
    code.line(f"{acc_t_name} acc = {_init(red, acc_t)};")
    code.line("int NAN_FLAG = 0;")
    _loops(code, mid, names, shape, bodies[0], nd - 1, f" reduction({omp}:acc){flag}")
    if passes == 2:
        code.line(f"const {acc_t_name} mean = acc / ({acc_t_name}){n};")
        code.line(f"{acc_t_name} acc2 = 0;")
        _loops(code, mid, names, shape, bodies[1], nd - 1, " reduction(+:acc2)")
    result = _finish(red, "acc2" if passes == 2 else "acc", n, ctype_of(dtype_of(node)), floats, "NAN_FLAG")
    code.line(f"{out}[{lin_out}] = {result.replace('ACC_T', acc_t_name)};")
    return acc_t


def _inner(
    name: str,
    node: fx.Node,
    x: fx.Node,
    red: Reduction,
    dims: tuple[int, ...],
    shape: list[int],
    sched: Schedule,
    cfg: dict[str, Any],
) -> str:
    """The last axis reduced: per output a task; every axis reduced: the parallel loop reduces."""
    nd = len(shape)
    body = CodeBuffer()
    reader = cpp_reader(sched)
    if any(k not in dims for k in range(nd)) and shape_of(x):
        kept = [k for k in range(nd) if k not in dims]
        block = CodeBuffer()
        acc_t = row_block(node, reader, cfg, "y", block, "ACC_T")
        body.line(f"typedef {acc_t} ACC_T;")
        body.line(f"#pragma omp parallel for schedule(static){threads_clause(cfg)}")
        with body.block(f"for (int64_t o = 0; o < {math.prod(shape[k] for k in kept)}; ++o)"):
            delinear_into(body, "o", [f"i{k}" for k in kept], [shape[k] for k in kept])
            body.splice(block)
        return step_function(name, sched, reader.reads, {sched.slot(node): "y"}, body)
    idx = [f"i{k}" for k in range(nd)] if shape_of(x) else []
    names = [f"i{k}" for k in range(nd)]
    mid = [k for k in dims if k != nd - 1]
    acc_t, floats = _acc_type(node, red, cfg), is_float(dtype_of(x))
    n = math.prod(shape[k] for k in dims)
    bodies = [
        _pass_lines(reader.fresh(), x, idx, red, "acc" if p == 0 else "acc2", p == 1)
        for p in range(2 if red.op == "var" else 1)
    ]
    body.line(f"typedef {acc_t} ACC_T;")
    _all_reduced(body, red, mid, names, shape, bodies, acc_t, n, ctype_of(dtype_of(node)), floats, cfg)
    return step_function(name, sched, reader.reads, {sched.slot(node): "y"}, body)


def _loops(
    code: CodeBuffer,
    mid: list[int],
    names: list[str],
    shape: list[int],
    body: list[Statement],
    last: int,
    clause: str,
    lo: str = "0",
    hi: str | None = None,
) -> None:
    """Nested loops over the reduced axes ``mid`` and a SIMD loop over ``last`` around ``body``."""
    if not mid:
        simd_loop(code, names[last], lo, hi or str(shape[last]), body, clause)
        return
    k = mid[0]
    with code.block(f"for (int64_t {names[k]} = 0; {names[k]} < {shape[k]}; ++{names[k]})"):
        _loops(code, mid[1:], names, shape, body, last, clause, lo, hi)


def _all_reduced(
    code: CodeBuffer,
    red: Reduction,
    mid: list[int],
    names: list[str],
    shape: list[int],
    bodies: list[list[Statement]],
    acc_t: str,
    n: int,
    out_ct: str,
    floats: bool,
    cfg: dict[str, Any],
) -> None:
    """Every axis reduced: tasks over the other reduced axes (and chunks of the last) reduce in
    the parallel loop itself."""
    last = len(shape) - 1
    outer = math.prod(shape[k] for k in mid)
    chunk = int(cfg.get("chunk", 4096))
    flag = floats and red.op in ("amax", "amin")
    omp = _omp_op(red)
    code.line(f"const int64_t nch = {outer} >= {SPLIT_BELOW} ? 1 : ({shape[last]} + {chunk - 1}) / {chunk};")
    code.line(f"const int64_t ch = ({shape[last]} + nch - 1) / nch;")
    code.line(f"ACC_T acc = {_init(red, acc_t)};")
    code.line("int NAN_FLAG = 0;")
    for p, body in enumerate(bodies):
        acc = "acc" if p == 0 else "acc2"
        clause = f" reduction({omp}:{acc})" + (" reduction(|:NAN_FLAG)" if flag else "")
        if p == 1:
            code.line(f"const ACC_T mean = acc / (ACC_T){n};")
            code.line("ACC_T acc2 = 0;")
        code.line(f"#pragma omp parallel for schedule(static){clause}{threads_clause(cfg)}")
        with code.block(f"for (int64_t task = 0; task < {outer} * nch; ++task)"):
            code.line("const int64_t o = task / nch;")
            code.line("const int64_t c0 = (task % nch) * ch;")
            code.line(f"const int64_t c1 = c0 + ch < {shape[last]} ? c0 + ch : {shape[last]};")
            delinear_into(code, "o", [names[k] for k in mid], [shape[k] for k in mid])
            _loops(code, [], names, shape, body, last, clause, "c0", "c1")
    result = _finish(red, "acc2" if len(bodies) == 2 else "acc", n, out_ct, floats, "NAN_FLAG")
    code.line(f"y[0] = {result};")


def _outer(
    name: str,
    node: fx.Node,
    x: fx.Node,
    red: Reduction,
    dims: tuple[int, ...],
    shape: list[int],
    sched: Schedule,
    cfg: dict[str, Any],
) -> str:
    """The last axis kept: per task one output row's chunk of accumulators, updated across it."""
    nd = len(shape)
    names = [f"i{k}" for k in range(nd)]
    last = nd - 1
    kept = [k for k in range(nd) if k not in dims]
    outer_kept = [k for k in kept if k != last]
    acc_t, floats = _acc_type(node, red, cfg), is_float(dtype_of(x))
    n = math.prod(shape[k] for k in dims)
    tile = int(cfg.get("tile", 256))
    reader = cpp_reader(sched)
    passes = 2 if red.op == "var" else 1
    bodies = [_tiled(reader.fresh(), x, names, red, p) for p in range(passes)]
    code = CodeBuffer()
    code.line(f"typedef {acc_t} ACC_T;")
    code.line(f"const int64_t nch = ({shape[last]} + {tile - 1}) / {tile};")
    code.line(f"#pragma omp parallel for schedule(static){threads_clause(cfg)}")
    with code.block(f"for (int64_t task = 0; task < {math.prod(shape[k] for k in outer_kept)} * nch; ++task)"):
        code.line("const int64_t o = task / nch;")
        code.line(f"const int64_t c0 = (task % nch) * {tile};")
        code.line(f"const int64_t c1 = c0 + {tile} < {shape[last]} ? c0 + {tile} : {shape[last]};")
        delinear_into(code, "o", [names[k] for k in outer_kept], [shape[k] for k in outer_kept])
        code.line(f"ACC_T acc[{tile}];")
        code.line(f"int nanf[{tile}];")
        code.line(f"for (int64_t j = 0; j < {tile}; ++j) {{ acc[j] = {_init(red, acc_t)}; nanf[j] = 0; }}")
        _loops(code, list(dims), names, shape, bodies[0], last, "", "c0", "c1")
        if passes == 2:
            code.line(f"ACC_T mean[{tile}], acc2[{tile}];")
            code.line(f"for (int64_t j = 0; j < {tile}; ++j) {{ mean[j] = acc[j] / (ACC_T){n}; acc2[j] = 0; }}")
            _loops(code, list(dims), names, shape, bodies[1], last, "", "c0", "c1")
        fin = _finish(red, "acc2[j]" if passes == 2 else "acc[j]", n, ctype_of(dtype_of(node)), floats, "nanf[j]")
        with code.block(f"for (int64_t {names[last]} = c0; {names[last]} < c1; ++{names[last]})"):
            code.line(f"const int64_t j = {names[last]} - c0;")
            code.line(f"y[{linear([names[k] for k in kept], [shape[k] for k in kept])}] = {fin};")
    return step_function(name, sched, reader.reads, {sched.slot(node): "y"}, code)


def _tiled(reader: Reader, x: fx.Node, names: list[str], red: Reduction, p: int) -> list[Statement]:
    """One pass's body over a tile of the kept last axis: per lane ``j`` an accumulator (and a NaN
    flag, and in var's second pass a mean)."""
    last = names[-1]
    fold = [
        Statement(s.line.replace("NAN_FLAG", "nanf[j]").replace("- mean", "- mean[j]" if p == 1 else "- mean"))
        for s in _pass_lines(reader, x, names, red, "acc[j]" if p == 0 else "acc2[j]", p == 1)[len(reader.lines) :]
    ]
    return [Statement(f"const int64_t j = {last} - c0;"), *reader.lines, *fold]
