"""C++ for the ops the lowering keeps whole: scans and arg-reductions (pooling: ``cpp_pool``).

Each reads its input through ``reader.Reader`` (so a pointwise chain before it is fused into the read)
and follows torch's CPU semantics where they are observable:

- cumsum/cumprod accumulate in double for float inputs (ATen's CPU accumulator type);
- argmax/argmin and max/min over a dim take the first extreme, and the first NaN wins (torch
  treats NaN as the extreme).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

from torch import fx

from forge.agents.builtin.lowering.code import CodeBuffer, delinear_into
from forge.agents.builtin.lowering.cpp_emit import cpp_reader, step_function, threads_clause
from forge.agents.builtin.lowering.ir import (
    ctype_of,
    delinear,
    dtype_of,
    int_arg,
    is_float,
    linear,
    shape_of,
)
from forge.agents.builtin.lowering.schedule import Schedule, Step
from forge.agents.builtin.lowering.trace import packet_name
from forge.agents.builtin.ops import CppMath


def arguments(node: fx.Node) -> list[Any]:
    """The node's positional arguments with the schema's defaults filled in."""
    schema = node.target._schema  # type: ignore[union-attr]
    out = []
    for k, arg in enumerate(schema.arguments):
        if k < len(node.args):
            out.append(node.args[k])
        elif arg.name in node.kwargs:
            out.append(node.kwargs[arg.name])
        else:
            out.append(arg.default_value if arg.has_default_value() else None)
    return out


def step_outputs(step: Step, sched: Schedule) -> dict[int, str]:
    """Which of the step's results are written: result position -> pointer name (y0, y1)."""
    if step.writes == (step.node,):
        return {0: f"y0:{sched.slot(step.node)}"}
    return {int_arg(w, 1): f"y{int_arg(w, 1)}:{sched.slot(w)}" for w in step.writes}


def written(outs: dict[int, str]) -> dict[int, str]:
    return {int(v.split(":")[1]): v.split(":")[0] for v in outs.values()}


def vector_scan_fits(node: fx.Node) -> bool:
    """A float32 cumsum along its innermost dim, long enough for 8-wide vectors: ``vector_scan``'s."""
    shape = list(shape_of(node.args[0])) if isinstance(node.args[0], fx.Node) else []
    if packet_name(node) != "aten.cumsum" or not shape or ctype_of(dtype_of(node)) != "float":
        return False
    return int(arguments(node)[1]) % len(shape) == len(shape) - 1 and shape[-1] >= 16


def scan_step(name: str, step: Step, sched: Schedule, cfg: dict[str, Any]) -> str:
    """cumsum/cumprod along one dim, ``cfg["rows"]`` scans at a time: each scan is a chain of
    dependent adds (a few cycles each), so one at a time leaves the core waiting on its own
    latency (eager's row cumsum ran at 8% of its bound here); a block of neighbouring scans
    advanced together is that many independent chains, and where the scanned dim is not the
    innermost, one contiguous vector. Each scan still adds in order, as ATen's does. A float32
    row cumsum takes ``vector_scan`` unless ``cfg["scan"]`` says ``rows``."""
    node = step.node
    if cfg.get("scan", "vector") == "vector" and vector_scan_fits(node):
        return vector_scan(name, step, sched, cfg)
    args = arguments(node)
    x = args[0]
    shape = list(shape_of(x)) or [1]
    nd = len(shape)
    dim = int(args[1]) % nd
    names = [f"i{k}" for k in range(nd)]
    others = [k for k in range(nd) if k != dim]
    outer = math.prod(shape[k] for k in others)
    out_ct = ctype_of(dtype_of(node))
    acc = _scan_acc(node, cfg)
    update, init = _scan_update(packet_name(node), acc)
    reader = cpp_reader(sched)
    v = reader.value(x, names if shape_of(x) else [])
    writes = written(step_outputs(step, sched))
    rows = max(1, min(int(cfg.get("rows", 1)), outer))
    code = CodeBuffer()
    code.line(f"#pragma omp parallel for schedule(static){threads_clause(cfg)}")
    with code.block(f"for (int64_t b = 0; b < {-(-outer // rows)}; ++b)"):
        code.line(f"const int64_t n = std::min<int64_t>({rows}, {outer} - b * {rows});")
        code.line(f"{acc} acc[{rows}];")
        code.line(f"for (int64_t r = 0; r < {rows}; ++r) acc[r] = {init};")
        along = f"for (int64_t {names[dim]} = 0; {names[dim]} < {shape[dim]}; ++{names[dim]})"
        with code.block(along), code.block("for (int64_t r = 0; r < n; ++r)"):
            code.line(f"const int64_t o = b * {rows} + r;")
            delinear_into(code, "o", [names[k] for k in others], [shape[k] for k in others])
            code.lines(reader.lines)
            code.lines(update(f"({acc}){v}"))
            code.line(f"y0[{linear(names, shape)}] = ({out_ct})acc[r];")
    return step_function(name, sched, reader.reads, writes, code)


# an 8-float prefix sum in registers: each 128-bit half by two shifted adds, then the low half's
# total into the high half (AVX shifts within halves only)
_PREFIX8 = (
    "s = _mm256_add_ps(s, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(s), 4)));",
    "s = _mm256_add_ps(s, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(s), 8)));",
    "h = _mm256_permute_ps(s, 0xFF);",
    "s = _mm256_add_ps(_mm256_add_ps(s, _mm256_permute2f128_ps(h, h, 0x08)), carry);",
)


def vector_scan(name: str, step: Step, sched: Schedule, cfg: dict[str, Any]) -> str:
    """A float32 cumsum along the innermost dim, one scan (row) per iteration of the parallel
    loop: 8 elements at a time summed in registers (``_PREFIX8``) and the running total carried
    as a broadcast vector, the row's tail one element at a time. The chain of dependent adds is
    one per 8 elements, not one per element; the sums are float32's, in a tree of 8 rather than
    in order, which the verifier's slack for a scan's length allows (its row cumsum: ~2.4x eager
    on this 2-core CPU, where 8 rows at a time ran at 1.0-1.1x)."""
    node = step.node
    x = arguments(node)[0]
    shape = list(shape_of(x))
    nd, length = len(shape), shape[-1]
    names = [f"i{k}" for k in range(nd)]
    outer = math.prod(shape[:-1])
    reader = cpp_reader(sched)
    v = reader.value(x, names)
    writes = written(step_outputs(step, sched))
    at_row = linear([*names[:-1], "0"], shape)
    code = CodeBuffer()
    code.line(f"#pragma omp parallel for schedule(static){threads_clause(cfg)}")
    with code.block(f"for (int64_t o = 0; o < {outer}; ++o)"):
        delinear_into(code, "o", names[:-1], shape[:-1])
        code.line(f"float* __restrict__ row = y0 + {at_row};")
        code.line("int64_t d = 0;")
        code.line("float acc = 0.0f;")
        code.line("#ifdef __AVX__")
        code.line("__m256 carry = _mm256_setzero_ps(), s, h;")
        with code.block(f"for (; d + 8 <= {length}; d += 8)"):
            code.line("alignas(32) float t[8];")
            with code.block("for (int64_t l = 0; l < 8; ++l)"):
                code.line(f"const int64_t {names[-1]} = d + l;")
                code.lines(reader.lines)
                code.line(f"t[l] = (float){v};")
            code.line("s = _mm256_load_ps(t);")
            code.lines(_PREFIX8)
            code.line("_mm256_storeu_ps(row + d, s);")
            code.line("h = _mm256_permute_ps(s, 0xFF);")
            code.line("carry = _mm256_permute2f128_ps(h, h, 0x11);")
        code.line("acc = _mm256_cvtss_f32(carry);")
        code.line("#endif")
        with code.block(f"for (; d < {length}; ++d)"):
            code.line(f"const int64_t {names[-1]} = d;")
            code.lines(reader.lines)
            code.line(f"acc += (float){v};")
            code.line("row[d] = acc;")
    return step_function(name, sched, reader.reads, writes, code)


# The vectorisable functions a step calls beside its pointwise ops' (``program._math_of``):
# logcumsumexp's fold, in float (``_scan_update``)
STEP_MATH: dict[str, frozenset[CppMath]] = {"aten.logcumsumexp": frozenset({CppMath.EXP, CppMath.LOG1P})}


def _scan_update(op: str, acc: str) -> tuple[Callable[[str], list[str]], str]:
    """(the lines that fold a value into ``acc[r]``, the accumulator's start) for a scan op.
    logcumsumexp folds as ATen's ``_log_add_exp_helper(x, acc)`` does, the accumulator second:
    NaN in it stays, and where both are the same infinity the new value is kept; in double with
    libm's exp/log1p (ATen's CPU accumulator), in float with the vectorizable forge_exp/log1p."""
    if op == "aten.cumsum":
        return (lambda v: [f"acc[r] += {v};"]), "0"
    if op == "aten.cumprod":
        return (lambda v: [f"acc[r] *= {v};"]), "1"
    exp, log1p = ("forge_exp", "forge_log1p") if acc == "float" else ("std::exp", "std::log1p")

    def fold(v: str) -> list[str]:
        return [
            f"const {acc} x = {v}, y = acc[r];",
            f"const {acc} lo = y != y ? y : std::min(x, y), hi = y != y ? y : std::max(x, y);",
            f"acc[r] = (lo != hi || std::isfinite(lo)) ? {log1p}({exp}(lo - hi)) + hi : x;",
        ]

    return fold, "-INFINITY"


def _scan_acc(node: fx.Node, cfg: dict[str, Any]) -> str:
    """The scan's accumulator: double for float inputs (ATen's CPU accumulator) unless the config
    asks for float (float64 inputs keep double); int64 for integers."""
    if not is_float(dtype_of(node)):
        return "int64_t"
    return "float" if cfg.get("acc") == "float" and ctype_of(dtype_of(node)) != "double" else "double"


def arg_step(name: str, step: Step, sched: Schedule, cfg: dict[str, Any]) -> str:
    """argmax/argmin (indices) and max.dim/min.dim (values, indices) along one dim."""
    node = step.node
    args = arguments(node)
    x = args[0]
    xshape = list(shape_of(x))
    is_max = packet_name(node) in ("aten.argmax", "aten.max")
    if args[1] is None:  # over the flattened input
        shape, dim = [max(1, math.prod(xshape))], 0
        idx_of = lambda names: delinear(names[0], xshape) if xshape else []  # noqa: E731
    else:
        shape = xshape or [1]
        dim = int(args[1]) % len(shape)
        idx_of = lambda names: names if xshape else []  # noqa: E731
    nd = len(shape)
    names = [f"i{k}" for k in range(nd)]
    others = [k for k in range(nd) if k != dim]
    outer = math.prod(shape[k] for k in others)
    reader = cpp_reader(sched)
    v = reader.value(x, idx_of(names))
    outs = step_outputs(step, sched)
    vals_only = packet_name(node) in ("aten.argmax", "aten.argmin")
    yv = None if vals_only else ("y0" if 0 in outs else None)
    yi = ("y0" if 0 in outs else None) if vals_only else ("y1" if 1 in outs else None)
    out_shape = list(shape_of(step.writes[0]))
    keep = len(out_shape) == nd and args[1] is not None
    out_idx = [("0" if k == dim else names[k]) for k in range(nd)] if keep else [names[k] for k in others]
    lin = linear(out_idx, out_shape) if out_shape else "0"
    ct = ctype_of(dtype_of(x))
    better = f"({v} > best || ({v} != {v}))" if is_max else f"({v} < best || ({v} != {v}))"
    if not is_float(dtype_of(x)):
        better = f"({v} > best)" if is_max else f"({v} < best)"
    writes = written(outs)
    code = CodeBuffer()
    with task_loop(code, cfg, outer, [names[k] for k in others], [shape[k] for k in others]):
        code.line(f"{ct} best = 0;")
        code.line("int64_t bi = -1;")
        with code.block(f"for (int64_t {names[dim]} = 0; {names[dim]} < {shape[dim]}; ++{names[dim]})"):
            code.lines(reader.lines)
            with code.block(f"if (bi < 0 || (best == best && {better}))"):
                code.line(f"best = {v};")
                code.line(f"bi = {names[dim]};")
        with code.block():
            code.lines([f"{yv}[{lin}] = best;"] if yv else [])
            code.lines([f"{yi}[{lin}] = bi;"] if yi else [])
    return step_function(name, sched, reader.reads, writes, code)


@contextlib.contextmanager
def task_loop(code: CodeBuffer, cfg: dict[str, Any], outer: int, names: list[str], shape: list[int]) -> Iterator[None]:
    """The parallel loop over the step's outer indices (``names``, set from the task ``o``)."""
    code.line(f"#pragma omp parallel for schedule(static){threads_clause(cfg)}")
    with code.block(f"for (int64_t o = 0; o < {outer}; ++o)"):
        delinear_into(code, "o", names, shape)
        yield
