"""Pointwise primitives as Triton expressions (the lowering's scalar code for CUDA devices).

The twin of ``cpp_expr``: each operand is already a Triton value of its node's dtype, and the
result is cast to the node's own dtype (``.to(tl.<dtype>)``), so Triton's promotion never decides
a type torch decided otherwise. NaN propagates through maximum/minimum as in torch. Only
``triton.language`` core functions are used (they also run under ``TRITON_INTERPRET=1``); tanh,
expm1, log1p, trunc and round are written from them. Index expressions come from ``ir`` in C
syntax, where ``/`` on indices is integer division; ``index`` writes them for Triton.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.ir import Unsupported, dtype_of, is_float, operand_dtype
from forge.agents.builtin.lowering.trace import packet_name

TL_TYPES: dict[torch.dtype, str] = {
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
    torch.int64: "tl.int64",
    torch.int32: "tl.int32",
    torch.int16: "tl.int16",
    torch.int8: "tl.int8",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}
_BINARY = {"prims.add": "+", "prims.sub": "-", "prims.mul": "*"}
_COMPARE = {"prims.eq": "==", "prims.ne": "!=", "prims.lt": "<", "prims.le": "<=", "prims.gt": ">", "prims.ge": ">="}
_FLOAT_UNARY = {
    "prims.exp": "tl.exp({a})",
    "prims.log": "tl.log({a})",
    "prims.log2": "tl.log2({a})",
    "prims.erf": "tl.erf({a})",
    "prims.sqrt": "tl.sqrt({a})",
    "prims.rsqrt": "tl.rsqrt({a})",
    "prims.sin": "tl.sin({a})",
    "prims.cos": "tl.cos({a})",
    "prims.floor": "tl.floor({a})",
    "prims.ceil": "tl.ceil({a})",
    "prims.sigmoid": "tl.sigmoid({a})",
    "prims.reciprocal": "(1.0 / {a})",
    # tanh from exp(-2|x|): no cancellation near 0 beyond float rounding, +-1 for large |x|
    "prims.tanh": "_tanh({a})",
    "prims.expm1": "_expm1({a})",
    "prims.log1p": "_log1p({a})",
    "prims.trunc": "tl.where({a} < 0, tl.ceil({a}), tl.floor({a}))",
    "prims.round": "_round_even({a})",
}

# Helpers the expressions above call, defined once in every Triton candidate of the lowering.
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


def tl_type(dtype: torch.dtype, where: str = "") -> str:
    if dtype not in TL_TYPES:
        raise Unsupported(f"{where}: dtype {dtype} is not one the Triton lowering emits".lstrip(": "))
    return TL_TYPES[dtype]


def index(expr: str) -> str:
    """An index expression of ``ir`` (C syntax) in Triton's: integer division is ``//``."""
    return expr.replace(" / ", " // ")


def tl_literal(value: Any, dtype: torch.dtype) -> str:
    """A Python scalar as Triton text of ``dtype`` (a plain number where Triton types it so)."""
    if dtype == torch.bool:
        return "1" if value else "0"
    if is_float(dtype):
        v = float(value)
        if math.isnan(v) or math.isinf(v):
            text = "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
            return f'float("{text}")'
        return repr(v)
    if isinstance(value, float) and not value.is_integer():
        raise Unsupported(f"the scalar {value} cannot be an integer literal")
    return str(int(value))


def _cast(expr: str, dtype: torch.dtype, where: str) -> str:
    return f"({expr}).to({tl_type(dtype, where)})"


def scalar_operand(value: Any, node: fx.Node) -> str:
    name = packet_name(node)
    if not isinstance(value, bool | int | float):
        raise Unsupported(f"{name}: argument {value!r} is not a tensor or number")
    if name in _COMPARE and isinstance(value, float):  # the operand's type, not the node's (bool)
        return tl_literal(value, torch.float64)
    if name in _COMPARE:
        return str(int(value))
    return tl_literal(value, dtype_of(node))


def _pow(a: str, b: Any, name: str) -> str:
    if isinstance(b, int | float) and not isinstance(b, bool):
        forms = {2: f"({a} * {a})", 3: f"({a} * {a} * {a})", 0.5: f"tl.sqrt({a})", 1: a, -1: f"(1.0 / {a})"}
        if b in forms:
            return forms[b]
    raise Unsupported(f"{name}: an exponent other than -1, 1, 2, 3 or 0.5 has no Triton form in the lowering yet")


def expression(node: fx.Node, ops: list[str]) -> str:
    """The Triton expression of pointwise ``node`` whose value operands are ``ops``."""
    name, dtype = packet_name(node), dtype_of(node)
    a = ops[0] if ops else ""
    b = ops[1] if len(ops) > 1 else ""
    if name in _BINARY:
        return _cast(f"{a} {_BINARY[name]} {b}", dtype, name)
    if name == "prims.div":  # on integers prims.div truncates toward zero, as Triton's // does
        return _cast(f"{a} {'/' if is_float(dtype) else '//'} {b}", dtype, name)
    if name in _COMPARE:
        return f"({a} {_COMPARE[name]} {b})"
    if name in _FLOAT_UNARY:
        if not is_float(dtype):
            raise Unsupported(f"{name}: on {dtype}")
        return _cast(_FLOAT_UNARY[name].format(a=a), dtype, name)
    if name == "prims.neg":
        return _cast(f"-{a}", dtype, name)
    if name == "prims.abs":
        return _cast(f"tl.abs({a})", dtype, name)
    if name == "prims.sign":
        sign = f"tl.where({a} > 0, 1, 0) - tl.where({a} < 0, 1, 0)"
        return _cast(f"tl.where({a} != {a}, {a}, {sign})" if is_float(dtype) else sign, dtype, name)
    if name in ("prims.maximum", "prims.minimum"):
        op = ">" if name == "prims.maximum" else "<"
        keep = f"({a} != {a}) | ({a} {op} {b})" if is_float(dtype) else f"{a} {op} {b}"
        return _cast(f"tl.where({keep}, {a}, {b})", dtype, name)
    if name == "prims.pow":
        return _cast(_pow(a, node.args[1] if not isinstance(node.args[1], fx.Node) else None, name), dtype, name)
    if name == "prims.where":
        return _cast(f"tl.where({a}, {b}, {ops[2]})", dtype, name)
    if name in ("prims.bitwise_or", "prims.bitwise_and", "prims.bitwise_xor"):
        op = {"prims.bitwise_or": "|", "prims.bitwise_and": "&", "prims.bitwise_xor": "^"}[name]
        return _cast(f"{a} {op} {b}", dtype, name)
    if name == "prims.bitwise_not":
        return f"({a} == 0)" if dtype == torch.bool else _cast(f"~{a}", dtype, name)
    if name == "prims.clone":
        return a
    if name == "prims.convert_element_type":
        return f"({a} != 0)" if dtype == torch.bool else _cast(a, dtype, name)
    if name == "prims.fmod" and not is_float(dtype):  # Triton's % on integers truncates, as C's does
        return _cast(f"{a} % {b}", dtype, name)
    if name == "prims.remainder" and not is_float(dtype):  # Python's: the sign of the divisor
        r = f"({a} % {b})"
        return _cast(f"tl.where(({r} != 0) & (({r} < 0) != ({b} < 0)), {r} + {b}, {r})", dtype, name)
    if name == "prims.signbit":
        return _signbit(a, operand_dtype(node))
    raise Unsupported(f"{name}: no Triton form in the lowering yet")


_SAME_WIDTH_INT = {torch.float64: "tl.int64", torch.float32: "tl.int32"}  # the float dtypes the emitter takes


def _signbit(a: str, dtype: torch.dtype) -> str:
    """The sign bit itself (-0.0 and -NaN count): a float's bits read as an integer of its width."""
    if not is_float(dtype):
        return f"({a} < 0)"
    if dtype not in _SAME_WIDTH_INT:
        raise Unsupported(f"prims.signbit: on {dtype}")
    return f"({a}.to({_SAME_WIDTH_INT[dtype]}, bitcast=True) < 0)"
