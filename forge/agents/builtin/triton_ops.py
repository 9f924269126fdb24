"""How Triton writes each op of the built-in agent's table (``op_table.OPS``), and the helpers
those forms call.

The twin of ``cpp_ops``. An op's entry (``TritonOp``) holds its two forms. ``lowered`` is the
general lowering's (CUDA devices): from operands already of the node's dtype, its result cast to
the node's own dtype through the ``cast`` it is given (``.to(tl.<dtype>)``), so Triton's promotion
never decides a type torch decided otherwise; NaN propagates through maximum/minimum as in torch.
Only ``triton.language`` core functions are used (they also run under ``TRITON_INTERPRET=1``); tanh,
expm1, log1p and round are helpers written from them (``HELPERS``). An op with no Triton form yet
is refused by name (``lowered`` None, or ``NoForm`` on some operands). ``chain`` is the pointwise
family's, on float values and uncast (``pointwise_expr``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from forge.agents.builtin.op_table import CLAMP_MAX, CLAMP_MIN, GELU, GELU_TANH, NoForm, Operands

Cast = Callable[[str], str]  # an expression -> it as the node's dtype
# operands, their cast to the node's dtype -> the expression
TritonForm = Callable[[Operands, Cast], str]
NOT_YET = "no Triton form in the lowering yet"


@dataclass(frozen=True)
class TritonOp:
    lowered: TritonForm | None = None  # the general lowering's (None: refused by name, or a composite it never sees)
    chain: str | None = None  # the pointwise family's, over {a} and {b} (None: not one it writes)


def _operator(text: str) -> TritonForm:
    """The same expression on every dtype, cast to the node's."""
    return lambda x, cast: cast(text.format(a=x.a, b=x.b, c=x.c))


def _plain(text: str) -> TritonForm:
    """The same expression on every dtype, already of the node's type (a bool)."""
    return lambda x, cast: text.format(a=x.a, b=x.b)


def _div(x: Operands, cast: Cast) -> str:
    """On integers prims.div truncates toward zero, as Triton's // does."""
    return cast(f"{x.a} {'/' if x.floating else '//'} {x.b}")


def _sign(x: Operands, cast: Cast) -> str:
    a = x.a
    sign = f"tl.where({a} > 0, 1, 0) - tl.where({a} < 0, 1, 0)"
    return cast(f"tl.where({a} != {a}, {a}, {sign})" if x.floating else sign)


def _extreme(op: str) -> TritonForm:
    """maximum (``op`` ">") or minimum ("<"): on floats NaN in either operand gives NaN, as torch's."""

    def form(x: Operands, cast: Cast) -> str:
        a, b = x.a, x.b
        keep = f"({a} != {a}) | ({a} {op} {b})" if x.floating else f"{a} {op} {b}"
        return cast(f"tl.where({keep}, {a}, {b})")

    return form


def _pow(x: Operands, cast: Cast) -> str:
    a, b = x.a, x.b_number
    if isinstance(b, int | float) and not isinstance(b, bool):
        forms = {2: f"({a} * {a})", 3: f"({a} * {a} * {a})", 0.5: f"tl.sqrt({a})", 1: a, -1: f"(1.0 / {a})"}
        if b in forms:
            return cast(forms[b])
    raise NoForm("an exponent other than -1, 1, 2, 3 or 0.5 has no Triton form in the lowering yet")


def _bitwise_not(x: Operands, cast: Cast) -> str:
    return f"({x.a} == 0)" if x.dtype == torch.bool else cast(f"~{x.a}")


def _convert(x: Operands, cast: Cast) -> str:
    return f"({x.a} != 0)" if x.dtype == torch.bool else cast(x.a)


def _fmod(x: Operands, cast: Cast) -> str:
    """Integers only: Triton's % on integers truncates, as C's does."""
    if x.floating:
        raise NoForm(NOT_YET)
    return cast(f"{x.a} % {x.b}")


def _remainder(x: Operands, cast: Cast) -> str:
    """Integers only. Python's: the sign of the divisor."""
    if x.floating:
        raise NoForm(NOT_YET)
    r = f"({x.a} % {x.b})"
    return cast(f"tl.where(({r} != 0) & (({r} < 0) != ({x.b} < 0)), {r} + {x.b}, {r})")


_SAME_WIDTH_INT = {torch.float64: "tl.int64", torch.float32: "tl.int32"}  # the float dtypes the emitter takes


def _signbit(x: Operands, cast: Cast) -> str:
    """The sign bit itself (-0.0 and -NaN count): a float's bits read as an integer of its width."""
    dtype = x.operand_dtype_of()
    if dtype not in (torch.float32, torch.float64):
        return f"({x.a} < 0)"
    return f"({x.a}.to({_SAME_WIDTH_INT[dtype]}, bitcast=True) < 0)"


TRITON_OPS: dict[str, TritonOp] = {
    "prims.add": TritonOp(_operator("{a} + {b}"), chain="({a} + {b})"),
    "prims.sub": TritonOp(_operator("{a} - {b}"), chain="({a} - {b})"),
    "prims.mul": TritonOp(_operator("{a} * {b}"), chain="({a} * {b})"),
    "prims.div": TritonOp(_div, chain="({a} / {b})"),
    "prims.pow": TritonOp(_pow),
    "prims.maximum": TritonOp(_extreme(">")),
    "prims.minimum": TritonOp(_extreme("<")),
    "prims.bitwise_or": TritonOp(_operator("{a} | {b}")),
    "prims.bitwise_and": TritonOp(_operator("{a} & {b}")),
    "prims.bitwise_xor": TritonOp(_operator("{a} ^ {b}")),
    "prims.fmod": TritonOp(_fmod),
    "prims.atan2": TritonOp(),
    "prims.remainder": TritonOp(_remainder),
    "prims.eq": TritonOp(_plain("({a} == {b})")),
    "prims.ne": TritonOp(_plain("({a} != {b})")),
    "prims.lt": TritonOp(_plain("({a} < {b})")),
    "prims.le": TritonOp(_plain("({a} <= {b})")),
    "prims.gt": TritonOp(_plain("({a} > {b})")),
    "prims.ge": TritonOp(_plain("({a} >= {b})")),
    "prims.where": TritonOp(_operator("tl.where({a}, {b}, {c})")),
    "prims.neg": TritonOp(_operator("-{a}"), chain="(-{a})"),
    "prims.abs": TritonOp(_operator("tl.abs({a})"), chain="tl.abs({a})"),
    "prims.sign": TritonOp(_sign),
    "prims.bitwise_not": TritonOp(_bitwise_not),
    "prims.signbit": TritonOp(_signbit),
    "prims.clone": TritonOp(_plain("{a}")),
    "prims.convert_element_type": TritonOp(_convert),
    "prims.exp": TritonOp(_operator("tl.exp({a})"), chain="tl.exp({a})"),
    # tanh from exp(-2|x|): no cancellation near 0 beyond float rounding, +-1 for large |x|
    "prims.tanh": TritonOp(_operator("_tanh({a})"), chain="(2.0 / (1.0 + tl.exp(-2.0 * {a})) - 1.0)"),
    "prims.sigmoid": TritonOp(_operator("tl.sigmoid({a})"), chain="(1.0 / (1.0 + tl.exp(-{a})))"),
    "prims.sqrt": TritonOp(_operator("tl.sqrt({a})"), chain="tl.sqrt({a})"),
    "prims.rsqrt": TritonOp(_operator("tl.rsqrt({a})"), chain="(1.0 / tl.sqrt({a}))"),
    "prims.expm1": TritonOp(_operator("_expm1({a})")),
    "prims.log": TritonOp(_operator("tl.log({a})")),
    "prims.log1p": TritonOp(_operator("_log1p({a})")),
    "prims.log2": TritonOp(_operator("tl.log2({a})")),
    "prims.erf": TritonOp(_operator("tl.erf({a})")),
    "prims.sin": TritonOp(_operator("tl.sin({a})")),
    "prims.cos": TritonOp(_operator("tl.cos({a})")),
    "prims.atan": TritonOp(),
    "prims.floor": TritonOp(_operator("tl.floor({a})")),
    "prims.ceil": TritonOp(_operator("tl.ceil({a})")),
    "prims.round": TritonOp(_operator("_round_even({a})")),
    "prims.trunc": TritonOp(_operator("tl.where({a} < 0, tl.ceil({a}), tl.floor({a}))")),
    "prims.reciprocal": TritonOp(_operator("(1.0 / {a})")),
    "aten.relu": TritonOp(chain="tl.where({a} < 0.0, 0.0, {a})"),
    "aten.silu": TritonOp(chain="({a} / (1.0 + tl.exp(-{a})))"),
    GELU: TritonOp(chain="(0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476)))"),
    # 1 + tanh(z) as 2 / (1 + exp(-2z))
    GELU_TANH: TritonOp(
        chain="(0.5 * {a} * (2.0 / (1.0 + tl.exp(-2.0 * 0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a})))))"
    ),
    CLAMP_MIN: TritonOp(chain="tl.where({a} < {b}, {b}, {a})"),  # {b}: the bound; NaN passes, as torch's
    CLAMP_MAX: TritonOp(chain="tl.where({a} > {b}, {b}, {a})"),
}

# The helpers the forms above call, defined once in every Triton candidate of the lowering (the
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
