"""How Triton writes the ops of the built-in agent's table (``table.OPS``): the builders of the
general lowering's forms (CUDA devices), and the helpers those forms call.

The twin of ``cpp_forms``: a form's result is cast to the node's own dtype through the ``cast`` it
is given (``.to(tl.<dtype>)``), so Triton's promotion never decides a type torch decided
otherwise; NaN propagates through maximum/minimum as in torch. Only ``triton.language`` core
functions are used (they also run under ``TRITON_INTERPRET=1``); tanh, expm1, log1p and round are
helpers written from them (``HELPERS``). An op with no Triton form yet is refused by name (its
``lowered`` None, or ``NoForm`` on some operands).
"""

from __future__ import annotations

import torch

from forge.agents.builtin.ops.record import Cast, NoForm, Operands, TritonForm

NOT_YET = "no Triton form in the lowering yet"


def typed_operator(text: str) -> TritonForm:
    """The same expression on every dtype, cast to the node's."""
    return lambda x, cast: cast(text.format(a=x.a, b=x.b, c=x.c))


def plain(text: str) -> TritonForm:
    """The same expression on every dtype, already of the node's type (a bool)."""
    return lambda x, cast: text.format(a=x.a, b=x.b)


def divide(x: Operands, cast: Cast) -> str:
    """On integers prims.div truncates toward zero, as Triton's // does."""
    return cast(f"{x.a} {'/' if x.floating else '//'} {x.b}")


def sign(x: Operands, cast: Cast) -> str:
    a = x.a
    sign = f"tl.where({a} > 0, 1, 0) - tl.where({a} < 0, 1, 0)"
    return cast(f"tl.where({a} != {a}, {a}, {sign})" if x.floating else sign)


def extreme(op: str) -> TritonForm:
    """maximum (``op`` ">") or minimum ("<"): on floats NaN in either operand gives NaN, as torch's."""

    def form(x: Operands, cast: Cast) -> str:
        a, b = x.a, x.b
        keep = f"({a} != {a}) | ({a} {op} {b})" if x.floating else f"{a} {op} {b}"
        return cast(f"tl.where({keep}, {a}, {b})")

    return form


def power(x: Operands, cast: Cast) -> str:
    a, b = x.a, x.b_number
    if isinstance(b, int | float) and not isinstance(b, bool):
        forms = {2: f"({a} * {a})", 3: f"({a} * {a} * {a})", 0.5: f"tl.sqrt({a})", 1: a, -1: f"(1.0 / {a})"}
        if b in forms:
            return cast(forms[b])
    raise NoForm("an exponent other than -1, 1, 2, 3 or 0.5 has no Triton form in the lowering yet")


def bitwise_not(x: Operands, cast: Cast) -> str:
    return f"({x.a} == 0)" if x.dtype == torch.bool else cast(f"~{x.a}")


def convert(x: Operands, cast: Cast) -> str:
    return f"({x.a} != 0)" if x.dtype == torch.bool else cast(x.a)


def fmod(x: Operands, cast: Cast) -> str:
    """Integers only: Triton's % on integers truncates, as C's does."""
    if x.floating:
        raise NoForm(NOT_YET)
    return cast(f"{x.a} % {x.b}")


def remainder(x: Operands, cast: Cast) -> str:
    """Integers only. Python's: the sign of the divisor."""
    if x.floating:
        raise NoForm(NOT_YET)
    r = f"({x.a} % {x.b})"
    return cast(f"tl.where(({r} != 0) & (({r} < 0) != ({x.b} < 0)), {r} + {x.b}, {r})")


_SAME_WIDTH_INT = {torch.float64: "tl.int64", torch.float32: "tl.int32"}  # the float dtypes the emitter takes


def signbit(x: Operands, cast: Cast) -> str:
    """The sign bit itself (-0.0 and -NaN count): a float's bits read as an integer of its width."""
    dtype = x.operand_dtype_of()
    if dtype not in (torch.float32, torch.float64):
        return f"({x.a} < 0)"
    return f"({x.a}.to({_SAME_WIDTH_INT[dtype]}, bitcast=True) < 0)"


# The helpers the forms call, defined once in every Triton candidate of the lowering (the
# pointwise family's kernels define none: its forms are written from ``triton.language`` alone).
HELPERS = """
@triton.jit
def _tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x != x, x, tl.where(x < 0, -t, t))


@triton.jit
def _expm1(x):
    p = x * (1.0 + x * (0.5 + x * (1.6666667e-1 + x * (4.1666668e-2 + x * (8.3333338e-3
        + x * (1.3888889e-3 + x * 1.9841270e-4))))))
    return tl.where((x > -0.35) & (x < 0.35), p, tl.exp(x) - 1.0)


@triton.jit
def _log1p(x):
    u = 1.0 + x
    d = u - 1.0
    r = tl.log(u) * (x / tl.where(d == 0.0, 1.0, d))
    return tl.where(d == 0.0, x, tl.where(u == float("inf"), u, r))


@triton.jit
def _round_even(x):
    r = tl.floor(x + 0.5)
    odd = (r - 2.0 * tl.floor(r * 0.5)) == 1.0
    return tl.where((r - x == 0.5) & odd, r - 1.0, r)


@triton.jit
def _mul(a, b):
    return a * b
"""
