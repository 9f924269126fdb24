"""C++ for the lowering's pooling steps: max and average pooling in 1-3D.

Max pooling keeps the last NaN of a window, and its index is the flat position in the input
plane, as ATen's CPU kernel does; average pooling divides as ``count_include_pad`` and
``divisor_override`` say. Both can run output point by output point (``points``: the window's
loops inside, skipping padding). Average pooling also runs by rows (``rows``, the ``pool`` knob's
first value): per output row, a row of accumulators that each window position adds a run of the
input row to, in one SIMD loop over the outputs it reaches, then one SIMD loop dividing; each
output adds the same values in the same order as point by point, so the results are the same.
A 3x3 average pool of 8x32x56x56 floats took 1.0 ms point by point on the 2-core VM (the window's
bounds tested in the innermost loop keep it scalar).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

from torch import fx

from forge.agents.builtin.lowering.code import CodeBuffer
from forge.agents.builtin.lowering.cpp_emit import cpp_reader, step_function
from forge.agents.builtin.lowering.cpp_kept import arguments, step_outputs, task_loop, written
from forge.agents.builtin.lowering.ir import Unsupported, ctype_of, dtype_of, linear, shape_of
from forge.agents.builtin.lowering.schedule import Schedule, Step
from forge.agents.builtin.lowering.trace import packet_name

ROW_MAX = 16384  # outputs in a row whose accumulators a task keeps on its stack (rows)


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


def by_rows_fits(node: fx.Node) -> bool:
    """Whether ``node`` is an average pooling ``rows`` can write (a row of outputs that fits)."""
    return packet_name(node).startswith("aten.avg_pool") and shape_of(node)[-1] <= ROW_MAX


def pool_step(name: str, step: Step, sched: Schedule, cfg: dict[str, Any]) -> str:
    pool = _Pool(step.node, step.writes[0])
    if not pool.is_max and cfg.get("pool", "rows") == "rows" and by_rows_fits(step.node):
        return _avg_by_rows(name, step, sched, cfg, pool)
    return _by_points(name, step, sched, cfg, pool)


def _by_points(name: str, step: Step, sched: Schedule, cfg: dict[str, Any], pool: _Pool) -> str:
    """One output at a time, its window's loops inside (padding skipped)."""
    oshape, lead, nsp = pool.oshape, pool.lead, len(pool.kernel)
    names = [f"o{k}" for k in range(len(oshape))]
    win = [f"w{s}" for s in range(nsp)]
    pos = [f"p{s}" for s in range(nsp)]
    reader = cpp_reader(sched)
    v = reader.value(pool.x, [*names[:lead], *pos])
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
            with _windows(code, win, pos, names[lead:], pool, range(nsp)):
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


def _avg_by_rows(name: str, step: Step, sched: Schedule, cfg: dict[str, Any], pool: _Pool) -> str:
    """A row of outputs at a time: per position of the window, the run of outputs whose window
    reads inside the input there adds its input value, in one SIMD loop; then the divisions."""
    oshape, lead, nsp = pool.oshape, pool.lead, len(pool.kernel)
    names = [f"o{k}" for k in range(len(oshape))]
    win = [f"w{s}" for s in range(nsp)]
    pos = [f"p{s}" for s in range(nsp)]
    reader = cpp_reader(sched)
    v = reader.value(pool.x, [*names[:lead], *pos])
    last, width, out = nsp - 1, oshape[-1], names[-1]
    s, pad, w, w_in = pool.stride[last], pool.pad[last], win[last], pool.sp_in[last]
    code = CodeBuffer()
    with task_loop(code, cfg, math.prod(oshape[:-1]), names[:-1], oshape[:-1]):
        code.line(f"double acc[{width}];")
        code.line("#pragma omp simd")
        code.line(f"for (int64_t j = 0; j < {width}; ++j) acc[j] = 0;")
        window = code.block(f"for (int64_t {w} = 0; {w} < {pool.kernel[last]}; ++{w})")
        with _windows(code, win, pos, names[lead:], pool, range(last)), window:
            # the outputs whose window reads inside the input at this position: lo <= out < hi
            code.line(f"const int64_t lo = {w} >= {pad} ? 0 : ({pad} - {w} + {s - 1}) / {s};")
            code.line(f"const int64_t top = {w_in - 1 + pad} - {w};")
            code.line(f"const int64_t hi = top < 0 ? 0 : std::min<int64_t>({width}, top / {s} + 1);")
            code.line("#pragma omp simd")
            with code.block(f"for (int64_t {out} = lo; {out} < hi; ++{out})"):
                code.line(f"const int64_t {pos[last]} = {out} * {s} - {pad} + {w};")
                code.lines(reader.lines)
                code.line(f"acc[{out}] += (double){v};")
        divisor = _divisor(pool, names[lead:])
        ct = ctype_of(dtype_of(step.writes[0]))
        code.line("#pragma omp simd")
        with code.block(f"for (int64_t {out} = 0; {out} < {width}; ++{out})"):
            code.line(f"y0[{linear(names, oshape)}] = ({ct})(acc[{out}] / (double)({divisor}));")
    return step_function(name, sched, reader.reads, written(step_outputs(step, sched)), code)


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
