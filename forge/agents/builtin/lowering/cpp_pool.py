"""C++ for the lowering's pooling steps: max and average pooling in 1-3D.

Max pooling keeps the last NaN of a window, and its index is the flat position in the input
plane, as ATen's CPU kernel does; average pooling divides as ``count_include_pad`` and
``divisor_override`` say. Both can run output point by point (``points``: the window's loops
inside, testing the input's bounds, which keeps the loop scalar). Average pooling also runs by
rows (``rows``, the ``pool`` knob's first value where ``separable`` does not fit): per output
row, each input row its window reaches is read once into a row padded with zeros, and one SIMD
loop over the outputs adds their window's run of it. A float32 input accumulates in float in
ATen's order, so its result is eager's to the bit. A 2-D average pooling whose windows overlap
along its rows also runs ``separable`` (tried first): a task writes a block of output rows, each
input row's horizontal window sums are made once and kept for the output rows they serve (within
the float rounding the verifier allows a sum, not to the bit). The pointwise step after it over
its output's shape (a residual added, an activation) runs in the same task on the row just
written (``PoolTail``), where it reads the pooling's result only at the element it writes. A 3x3
average pool of 8x32x56x56 floats with a residual added took 0.89 ms point by point, 0.66 ms by
rows and 0.58 ms with the residual in the pooling's task on the 2-core VM (eager 3.62 ms).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.code import CodeBuffer, Statement
from forge.agents.builtin.lowering.cpp_emit import cpp_reader, simd_loop, step_function
from forge.agents.builtin.lowering.cpp_kept import arguments, step_outputs, task_loop, written
from forge.agents.builtin.lowering.ir import Unsupported, ctype_of, dtype_of, linear, shape_of
from forge.agents.builtin.lowering.reader import Reader, without_buffer
from forge.agents.builtin.lowering.schedule import Schedule, Step, StepKind
from forge.agents.builtin.lowering.trace import packet_name

ROW_MAX = 16384  # a row's outputs and its padded input a task keeps on its stack (rows)


def _expand(value: Any, n: int, default: int) -> list[int]:
    if value is None or value == []:
        return [default] * n
    vals = [int(v) for v in (value if isinstance(value, list | tuple) else [value])]
    return vals * n if len(vals) == 1 else vals


class _Pool:
    """A pooling node's geometry, read from its arguments."""

    def __init__(self, node: fx.Node, out_node: fx.Node) -> None:
        op = packet_name(node)
        self.is_max = op.startswith("aten.max_pool")
        nsp = int(op.split("pool")[1][0])
        self.args = arguments(node)
        self.x = self.args[0]
        self.xshape = list(shape_of(self.x))
        self.oshape = list(shape_of(out_node))
        self.kernel = _expand(self.args[1], nsp, 1)
        self.stride = _expand(self.args[2], nsp, 0) if self.args[2] not in (None, []) else list(self.kernel)
        self.pad = _expand(self.args[3], nsp, 0)
        self.dil = _expand(self.args[4], nsp, 1) if self.is_max else [1] * nsp
        if any(d == 0 for d in self.stride):
            raise Unsupported(f"{op}: a zero stride")
        self.lead = len(self.xshape) - nsp
        self.sp_in = self.xshape[self.lead :]


def _span(pool: _Pool) -> int:
    """The padded row's length: every input position of the last axis plus the padding on both
    sides, or as far as the last output's window reaches (ceil_mode)."""
    s, pad, k, w_in = pool.stride[-1], pool.pad[-1], pool.kernel[-1], pool.sp_in[-1]
    return max(w_in + pad, (pool.oshape[-1] - 1) * s - pad + k) + pad


def by_rows_fits(node: fx.Node) -> bool:
    """Whether ``node`` is an average pooling ``rows`` can write: its row of outputs and its
    padded input row fit a task's stack (``ROW_MAX`` each)."""
    if not packet_name(node).startswith("aten.avg_pool"):
        return False
    try:
        pool = _Pool(node, node)
    except Unsupported:
        return False
    return pool.oshape[-1] <= ROW_MAX and _span(pool) <= ROW_MAX


def separable_fits(node: fx.Node) -> bool:
    """Whether ``node`` is a 2-D average pooling ``separable`` can write: by rows, with windows
    that overlap along the rows (a stride under the window: each input row's horizontal sums
    serve several output rows), their sums for one window's rows kept on a task's stack."""
    if not by_rows_fits(node):
        return False
    pool = _Pool(node, node)
    return len(pool.kernel) == 2 and pool.stride[0] < pool.kernel[0] and pool.kernel[0] * pool.oshape[-1] <= ROW_MAX


def _writer(cfg: dict[str, Any], node: fx.Node) -> str:
    """How an average pooling is written: ``separable``, ``rows`` or ``points`` (the ``pool``
    knob, where the pooling fits it)."""
    chosen = cfg.get("pool", "rows")
    if chosen == "separable" and separable_fits(node):
        return "separable"
    return "rows" if chosen in ("rows", "separable") and by_rows_fits(node) else "points"


def pool_step(name: str, step: Step, sched: Schedule, cfg: dict[str, Any]) -> str:
    pool = _Pool(step.node, step.writes[0])
    writer = "points" if pool.is_max else _writer(cfg, step.node)
    if writer == "separable":
        code = _avg_separable(name, step, sched, cfg, pool, None)
    elif writer == "rows":
        code = _avg_by_rows(name, step, sched, cfg, pool, None)
    else:
        return _by_points(name, step, sched, cfg, pool)
    assert code is not None
    return code


@dataclass(frozen=True)
class PoolTail:
    """An average pooling by rows (or separable) and the pointwise step after it over its
    output's shape (a residual added, an activation): the tail runs in the pooling's task, on the
    row it has just written, while it is in cache."""

    pool: Step
    tail: Step

    @property
    def steps(self) -> tuple[Step, ...]:
        return (self.pool, self.tail)


def pool_tails(units: list[Any], sched: Schedule, cfg: dict[str, Any]) -> list[Any]:
    """``units`` with each average pooling written by rows and the pointwise step right after it
    over the pooling's output shape made one ``PoolTail``."""
    out: list[Any] = []
    for unit in units:
        last = out[-1] if out else None
        if (
            isinstance(unit, Step)
            and isinstance(last, Step)
            and last.kind is StepKind.POOL
            and unit.kind is StepKind.POINTWISE
            and not _Pool(last.node, last.writes[0]).is_max
            and _writer(cfg, last.node) != "points"
            and shape_of(unit.node) == shape_of(last.writes[0])
            and unit.node not in sched.overwrites
            # both write row-major here: a buffer laid out for a convolution is left to its own step
            and not {sched.slot(unit.node), sched.slot(last.writes[0])} & set(sched.layouts)
        ):
            out[-1] = PoolTail(last, unit)
        else:
            out.append(unit)
    return out


def pool_with_tail(name: str, unit: PoolTail, sched: Schedule, cfg: dict[str, Any]) -> str | None:
    """The pooling's kernel running the tail on each row it writes, or None where the tail reads
    the pooling's result anywhere but at the element it writes (then the two run apart)."""
    pool = _Pool(unit.pool.node, unit.pool.writes[0])
    if _writer(cfg, unit.pool.node) == "separable":
        return _avg_separable(name, unit.pool, sched, cfg, pool, unit.tail)
    return _avg_by_rows(name, unit.pool, sched, cfg, pool, unit.tail)


def _input_read(pool: _Pool, sched: Schedule) -> tuple[list[str], list[str], list[str], Reader, str]:
    """The output's index names, the window's and the input position's per spatial axis, and the
    reader with the input's value at (leading output indices, positions)."""
    nsp = len(pool.kernel)
    names = [f"o{k}" for k in range(len(pool.oshape))]
    win = [f"w{s}" for s in range(nsp)]
    pos = [f"p{s}" for s in range(nsp)]
    reader = cpp_reader(sched)
    return names, win, pos, reader, reader.value(pool.x, [*names[: pool.lead], *pos])


def _by_points(name: str, step: Step, sched: Schedule, cfg: dict[str, Any], pool: _Pool) -> str:
    """One output at a time, its window's loops inside (padding skipped)."""
    oshape, lead = pool.oshape, pool.lead
    names, win, pos, reader, v = _input_read(pool, sched)
    outs = step_outputs(step, sched)
    lin = linear(names, oshape)
    code = CodeBuffer()
    with task_loop(code, cfg, math.prod(oshape[:-1]), names[:-1], oshape[:-1]):
        last = names[-1]
        with code.block(f"for (int64_t {last} = 0; {last} < {oshape[-1]}; {last}++)"):
            if pool.is_max:
                code.line(f"{ctype_of(dtype_of(pool.x))} best = -INFINITY;")
                code.line("int64_t bi = -1;")
            else:
                code.line("double acc = 0;")
                code.line("int64_t valid = 0;")
            with _windows(code, win, pos, names[lead:], pool, range(len(win))):
                code.lines(reader.lines)
                if pool.is_max:
                    plane = linear(pos, pool.sp_in)
                    code.line(f"if (bi < 0 || {v} > best || {v} != {v}) {{ best = {v}; bi = {plane}; }}")
                else:
                    code.line(f"acc += (double){v};")
                    code.line("++valid;")
            if pool.is_max:
                code.lines([f"y0[{lin}] = best;"] if 0 in outs else [])
                code.lines([f"y1[{lin}] = bi;"] if 1 in outs else [])
            else:
                divisor = _divisor(pool, names[lead:])
                code.line(f"y0[{lin}] = ({ctype_of(dtype_of(step.writes[0]))})(acc / (double)({divisor}));")
    return step_function(name, sched, reader.reads, written(outs), code)


def _avg_by_rows(
    name: str, step: Step, sched: Schedule, cfg: dict[str, Any], pool: _Pool, tail: Step | None
) -> str | None:
    """A row of outputs at a time: for each position of the window's leading axes inside the
    input, the input row there (what the reader computes, once per element) into a row padded
    with zeros, then one SIMD loop over the outputs adding their window's run of it; then the
    divisions. A float32 input accumulates in float, as ATen's CPU kernel does, adding each
    output's values in ATen's order (a padding zero added leaves a sum that began at +0 as it
    was), so the result is eager's to the bit."""
    oshape, lead = pool.oshape, pool.lead
    names, win, pos, reader, v = _input_read(pool, sched)
    last, width, out = len(win) - 1, oshape[-1], names[-1]
    s, pad, k, w_in = pool.stride[last], pool.pad[last], pool.kernel[last], pool.sp_in[last]
    span = _span(pool)
    acc_t = "float" if dtype_of(pool.x) == torch.float32 else "double"
    # with a tail, the output pointer is named as the tail's reads of it are
    yname = f"b{sched.slot(step.writes[0])}" if tail is not None else "y0"
    code = CodeBuffer()
    with task_loop(code, cfg, math.prod(oshape[:-1]), names[:-1], oshape[:-1]):
        code.line(f"{acc_t} acc[{width}];")
        code.line(f"{acc_t} row[{span}];")
        code.line(f"for (int64_t j = 0; j < {width}; ++j) acc[j] = 0;")
        code.line(f"for (int64_t j = 0; j < {span}; ++j) row[j] = 0;")
        with _windows(code, win, pos, names[lead:], pool, range(last)):
            code.line("#pragma omp simd")
            with code.block(f"for (int64_t {pos[last]} = 0; {pos[last]} < {w_in}; ++{pos[last]})"):
                code.lines(reader.lines)
                code.line(f"row[{pos[last]} + {pad}] = ({acc_t}){v};")
            code.line("#pragma omp simd")
            with code.block(f"for (int64_t {out} = 0; {out} < {width}; ++{out})"):
                wl = win[last]
                code.line(f"for (int64_t {wl} = 0; {wl} < {k}; ++{wl}) acc[{out}] += row[{out} * {s} + {wl}];")
        if not _finish_row(code, pool, step, sched, reader, names, yname, acc_t, tail):
            return None
    return _closed(name, step, sched, reader, yname, tail, code)


BLOCK_ROWS = 8  # output rows a separable task writes: each input row's sums are made once for them


def _avg_separable(
    name: str, step: Step, sched: Schedule, cfg: dict[str, Any], pool: _Pool, tail: Step | None
) -> str | None:
    """A block of ``BLOCK_ROWS`` output rows of one plane a task: each input row the block's
    windows reach is read once (what the reader computes, once an element) into a row padded with
    zeros, and its horizontal window sums (one per output column) are kept in a ring of as many
    rows as the window is tall; an output row adds the sums of its window's rows. Each input row's
    sums are made once, not once per output row its window covers: a 3x3 window's nine additions
    an output become about four. The order of the additions is not ATen's (rows of three, then
    the rows' sums): within the float rounding the verifier allows a sum, not eager's to the bit."""
    oshape = pool.oshape
    names, _, pos, reader, v = _input_read(pool, sched)
    width, out, rows = oshape[-1], names[-1], oshape[-2]
    (s0, s1), (pad0, pad1), (k0, k1), (h_in, w_in) = pool.stride, pool.pad, pool.kernel, pool.sp_in
    span, blocks = _span(pool), -(-rows // BLOCK_ROWS)
    acc_t = "float" if dtype_of(pool.x) == torch.float32 else "double"
    yname = f"b{sched.slot(step.writes[0])}" if tail is not None else "y0"
    block, o2 = "ob", names[-2]
    code = CodeBuffer()
    with task_loop(code, cfg, math.prod(oshape[:-2]) * blocks, [*names[:-2], block], [*oshape[:-2], blocks]):
        code.line(f"{acc_t} acc[{width}];")
        code.line(f"{acc_t} row[{span}];")
        code.line(f"{acc_t} sums[{k0}][{width}];")
        code.line(f"int64_t held[{k0}];")
        code.line(f"for (int64_t j = 0; j < {k0}; ++j) held[j] = -1;")
        code.line(f"for (int64_t j = 0; j < {span}; ++j) row[j] = 0;")
        last = f"std::min<int64_t>({block} * {BLOCK_ROWS} + {BLOCK_ROWS}, {rows})"
        with code.block(f"for (int64_t {o2} = {block} * {BLOCK_ROWS}; {o2} < {last}; ++{o2})"):
            code.line(f"for (int64_t j = 0; j < {width}; ++j) acc[j] = 0;")
            with code.block(f"for (int64_t w0 = 0; w0 < {k0}; ++w0)"):
                code.line(f"const int64_t {pos[0]} = {o2} * {s0} - {pad0} + w0;")
                code.line(f"if ({pos[0]} < 0 || {pos[0]} >= {h_in}) continue;")
                code.line(f"{acc_t}* hs = sums[{pos[0]} % {k0}];")
                with code.block(f"if (held[{pos[0]} % {k0}] != {pos[0]})"):
                    code.line("#pragma omp simd")
                    with code.block(f"for (int64_t {pos[1]} = 0; {pos[1]} < {w_in}; ++{pos[1]})"):
                        code.lines(reader.lines)
                        code.line(f"row[{pos[1]} + {pad1}] = ({acc_t}){v};")
                    code.line("#pragma omp simd")
                    with code.block(f"for (int64_t {out} = 0; {out} < {width}; ++{out})"):
                        code.line(f"{acc_t} h = 0;")
                        code.line(f"for (int64_t w1 = 0; w1 < {k1}; ++w1) h += row[{out} * {s1} + w1];")
                        code.line(f"hs[{out}] = h;")
                    code.line(f"held[{pos[0]} % {k0}] = {pos[0]};")
                code.line("#pragma omp simd")
                with code.block(f"for (int64_t {out} = 0; {out} < {width}; ++{out})"):
                    code.line(f"acc[{out}] += hs[{out}];")
            if not _finish_row(code, pool, step, sched, reader, names, yname, acc_t, tail):
                return None
    return _closed(name, step, sched, reader, yname, tail, code)


def _finish_row(
    code: CodeBuffer,
    pool: _Pool,
    step: Step,
    sched: Schedule,
    reader: Reader,
    names: list[str],
    yname: str,
    acc_t: str,
    tail: Step | None,
) -> bool:
    """The row's divisions into ``yname``, then the tail on it (``_tail_row``); False where the
    tail reads the pooling's result anywhere but at the element it writes."""
    oshape, out = pool.oshape, names[-1]
    divisor = _divisor(pool, names[pool.lead :])
    ct = ctype_of(dtype_of(step.writes[0]))
    code.line("#pragma omp simd")
    with code.block(f"for (int64_t {out} = 0; {out} < {oshape[-1]}; ++{out})"):
        code.line(f"{yname}[{linear(names, oshape)}] = ({ct})(acc[{out}] / ({acc_t})({divisor}));")
    return tail is None or _tail_row(code, tail, sched, reader, names, oshape, step.writes[0])


def _closed(
    name: str, step: Step, sched: Schedule, reader: Reader, yname: str, tail: Step | None, code: CodeBuffer
) -> str:
    """The step function: the pooling's buffer written as ``yname``, and the tail's where it runs."""
    writes = {sched.slot(step.writes[0]): yname}
    if tail is not None:
        writes[sched.slot(tail.node)] = f"b{sched.slot(tail.node)}"
    return step_function(name, sched, reader.reads, writes, code)


def _tail_row(
    code: CodeBuffer, tail: Step, sched: Schedule, reader: Reader, names: list[str], oshape: list[int], pooled: fx.Node
) -> bool:
    """The tail's SIMD loop over the row the task has just written; False where it reads the
    pooling's result anywhere but at the element it writes."""
    tail_reader = Reader(without_buffer(sched, tail.node), reader.dialect, reader.reads, set())
    lin = linear(names, oshape)
    value = tail_reader.value(tail.node, names, lin)
    if any(slot == sched.slot(pooled) and offset != lin for slot, offset in tail_reader.loads):
        return False
    body = [*tail_reader.lines, Statement(f"b{sched.slot(tail.node)}[{lin}] = {value};")]
    simd_loop(code, names[-1], "0", str(oshape[-1]), body)
    return True


@contextlib.contextmanager
def _windows(
    code: CodeBuffer, win: list[str], pos: list[str], onames: list[str], pool: _Pool, dims: range
) -> Iterator[None]:
    """Nested loops over a pooling window's positions inside the input (padding skipped), along
    the spatial ``dims``."""
    with contextlib.ExitStack() as stack:
        for s in dims:
            stack.enter_context(code.block(f"for (int64_t {win[s]} = 0; {win[s]} < {pool.kernel[s]}; ++{win[s]})"))
            at = f"{onames[s]} * {pool.stride[s]} - {pool.pad[s]} + {win[s]} * {pool.dil[s]}"
            code.line(f"const int64_t {pos[s]} = {at};")
            code.line(f"if ({pos[s]} < 0 || {pos[s]} >= {pool.sp_in[s]}) continue;")
        yield


def _divisor(pool: _Pool, onames: list[str]) -> str:
    """avg_pool's divisor as ATen computes it (the window clipped to the padded input, or only
    to the input when count_include_pad is false, or the override)."""
    args = pool.args
    if len(args) > 6 and args[6] is not None:
        return str(int(args[6]))
    include_pad = args[5] if len(args) > 5 and args[5] is not None else True
    terms = []
    for s, o in enumerate(onames):
        lo = f"({o} * {pool.stride[s]} - {pool.pad[s]})"
        hi = f"std::min<int64_t>({lo} + {pool.kernel[s]}, {pool.sp_in[s] + pool.pad[s]})"
        if include_pad:
            terms.append(f"({hi} - {lo})")
        else:
            terms.append(f"(std::min<int64_t>({hi}, {pool.sp_in[s]}) - std::max<int64_t>({lo}, 0))")
    return " * ".join(terms)
