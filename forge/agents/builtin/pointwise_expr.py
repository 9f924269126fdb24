"""Elementwise fx nodes as expressions in the built-in coder's two kernel languages.

A node becomes one expression over earlier values (``v`` the input, ``p<j>`` the parameters,
``t<k>`` earlier results) in C++ on floats (CPU) or in Triton (GPU). Both keep the same NaN
behaviour as torch for relu and clamp (a comparison with NaN is false, so NaN passes through).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch
import torch.fx as fx
import torch.nn.functional as F

from forge.agents.builtin.gelu_specials import gelu_nan_at_pos_inf

_BINARY = {
    operator.add: "+",
    torch.add: "+",
    operator.sub: "-",
    torch.sub: "-",
    operator.mul: "*",
    torch.mul: "*",
    operator.truediv: "/",
    torch.div: "/",
}
_BINARY_METHODS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_UNARY_FUNCS = {
    torch.relu: "relu",
    F.relu: "relu",
    torch.sigmoid: "sigmoid",
    F.sigmoid: "sigmoid",
    torch.tanh: "tanh",
    F.tanh: "tanh",
    torch.exp: "exp",
    torch.neg: "neg",
    operator.neg: "neg",
    torch.abs: "abs",
    F.silu: "silu",
    torch.sqrt: "sqrt",
    torch.rsqrt: "rsqrt",
}


@dataclass(frozen=True)
class Dialect:
    suffix: str  # after a float literal
    unary: dict[str, str]
    select: str  # "{c} ? {a} : {b}" in this language
    gelu: str
    gelu_tanh: str
    statement: str  # assigns {expr} to {name}
    pos_inf: str | None = None  # +inf in this language, where torch's GELU is matched there (CPU)


CPP = Dialect(
    suffix="f",
    unary={
        "relu": "({a} < 0.f ? 0.f : {a})",
        "sigmoid": "(1.0f / (1.0f + forge_exp(-{a})))",
        "tanh": "forge_tanh({a})",
        "exp": "forge_exp({a})",
        "neg": "(-{a})",
        "abs": "std::fabs({a})",
        "silu": "({a} / (1.0f + forge_exp(-{a})))",
        "sqrt": "std::sqrt({a})",
        "rsqrt": "(1.0f / std::sqrt({a}))",
    },
    select="({c} ? {a} : {b})",
    gelu="(0.5f * {a} * (1.0f + forge_erf({a} * 0.7071067811865476f)))",
    gelu_tanh="(0.5f * {a} * (1.0f + forge_tanh(0.7978845608028654f * ({a} + 0.044715f * {a} * {a} * {a}))))",
    statement="float {name} = {expr};",
    pos_inf="__builtin_inff()",
)

TRITON = Dialect(
    suffix="",
    unary={
        "relu": "tl.where({a} < 0.0, 0.0, {a})",
        "sigmoid": "(1.0 / (1.0 + tl.exp(-{a})))",
        "tanh": "(2.0 / (1.0 + tl.exp(-2.0 * {a})) - 1.0)",
        "exp": "tl.exp({a})",
        "neg": "(-{a})",
        "abs": "tl.abs({a})",
        "silu": "({a} / (1.0 + tl.exp(-{a})))",
        "sqrt": "tl.sqrt({a})",
        "rsqrt": "(1.0 / tl.sqrt({a}))",
    },
    select="tl.where({c}, {a}, {b})",
    gelu="(0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476)))",
    gelu_tanh="(0.5 * {a} * (2.0 / (1.0 + tl.exp(-2.0 * 0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a})))))",
    statement="{name} = {expr}",
)


def gelu(a: str, approximate: str, d: Dialect) -> str:
    """GELU of the expression ``a`` ("none": the exact form with erf; "tanh"), giving what torch
    gives at +inf on the CPU where this dialect knows how to write +inf (``gelu_specials``)."""
    formula = (d.gelu if approximate == "none" else d.gelu_tanh).format(a=a)
    if d.pos_inf is not None and gelu_nan_at_pos_inf("cpu", approximate):  # inf - inf: NaN, as torch gives
        return d.select.format(c=f"{a} == {d.pos_inf}", a=f"({a} - {a})", b=formula)
    return formula


def literal(value: object, d: Dialect) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if math.isinf(value) or math.isnan(value):
        return None
    return f"{float(value)!r}{d.suffix}"


def _operand(a: object, env: dict[fx.Node, str], d: Dialect) -> str | None:
    if isinstance(a, fx.Node):
        return env.get(a)
    return literal(a, d)


def expression(node: fx.Node, env: dict[fx.Node, str], d: Dialect) -> str | None:
    """The node's value in dialect ``d``, or None when it is not an elementwise op handled here."""
    t, args, kw = node.target, node.args, node.kwargs
    if node.op == "call_method":
        if t in _BINARY_METHODS and len(args) == 2 and not kw:
            a, b = _operand(args[0], env, d), _operand(args[1], env, d)
            return f"({a} {_BINARY_METHODS[str(t)]} {b})" if a and b else None
        if t in d.unary and len(args) == 1 and not kw:
            a = _operand(args[0], env, d)
            return d.unary[str(t)].format(a=a) if a else None
        return None
    if t in _BINARY and len(args) == 2 and not kw:
        a, b = _operand(args[0], env, d), _operand(args[1], env, d)
        return f"({a} {_BINARY[t]} {b})" if a and b else None
    if t in _UNARY_FUNCS and len(args) == 1 and kw in ({}, {"inplace": False}):
        a = _operand(args[0], env, d)
        return d.unary[_UNARY_FUNCS[t]].format(a=a) if a else None
    if t is F.gelu and len(args) == 1:
        a = _operand(args[0], env, d)
        approx = kw.get("approximate", "none")
        if not a or approx not in ("none", "tanh"):
            return None
        return gelu(a, str(approx), d)
    if t in (torch.clamp, torch.clip) and len(args) == 1:
        a = _operand(args[0], env, d)
        lo, hi = kw.get("min"), kw.get("max")
        if not a or (lo is None and hi is None):
            return None
        out: str | None = a
        if lo is not None:
            lo_s = literal(lo, d)
            out = d.select.format(c=f"{out} < {lo_s}", a=lo_s, b=out) if lo_s else None
        if hi is not None and out:
            hi_s = literal(hi, d)
            out = d.select.format(c=f"{out} > {hi_s}", a=hi_s, b=out) if hi_s else None
        return out
    return None
