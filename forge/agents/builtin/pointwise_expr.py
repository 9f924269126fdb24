"""Elementwise fx nodes as expressions in the built-in coder's two kernel languages.

A node becomes one expression over earlier values (``v`` the input, ``p<j>`` the parameters,
``t<k>`` earlier results) in C++ on floats (CPU) or in Triton (GPU). Which op a node is comes from
the op table (``ops.FUNCTIONS``, ``ops.METHODS``); how each language writes it, from the same
op's record (its C++ and Triton ``chain`` forms). Both keep the same
NaN behaviour as torch for relu and clamp (a comparison with NaN is false, so NaN passes through).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch.fx as fx

from forge.agents.builtin.gelu_specials import gelu_nan_at_pos_inf
from forge.agents.builtin.ops import CLAMP_MAX, CLAMP_MIN, FUNCTIONS, GELU, GELU_TANH, METHODS, OPS, Op


@dataclass(frozen=True)
class ChainLanguage:
    """How one kernel language writes the pointwise family's float chains."""

    forms: Mapping[str, str]  # op name -> its form over {a} (and {b})
    suffix: str  # after a float literal
    select: str  # "{c} ? {a} : {b}" in this language
    statement: str  # assigns {expr} to {name}
    pos_inf: str | None = None  # +inf in this language, where torch's GELU is matched there (CPU)


CPP = ChainLanguage(
    forms={name: op.cpp.chain for name, op in OPS.items() if op.cpp.chain is not None},
    suffix="f",
    select="({c} ? {a} : {b})",
    statement="float {name} = {expr};",
    pos_inf="__builtin_inff()",
)

TRITON = ChainLanguage(
    forms={name: op.triton.chain for name, op in OPS.items() if op.triton.chain is not None},
    suffix="",
    select="tl.where({c}, {a}, {b})",
    statement="{name} = {expr}",
)


def gelu(a: str, approximate: str, d: ChainLanguage) -> str:
    """GELU of the expression ``a`` ("none": the exact form with erf; "tanh"), giving what torch
    gives at +inf on the CPU where this language knows how to write +inf (``gelu_specials``)."""
    formula = d.forms[GELU if approximate == "none" else GELU_TANH].format(a=a)
    if d.pos_inf is not None and gelu_nan_at_pos_inf("cpu", approximate):  # inf - inf: NaN, as torch gives
        return d.select.format(c=f"{a} == {d.pos_inf}", a=f"({a} - {a})", b=formula)
    return formula


def literal(value: object, d: ChainLanguage) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if math.isinf(value) or math.isnan(value):
        return None
    return f"{float(value)!r}{d.suffix}"


def _operand(a: object, env: dict[fx.Node, str], d: ChainLanguage) -> str | None:
    if isinstance(a, fx.Node):
        return env.get(a)
    return literal(a, d)


def _written(op: Op, args: tuple, env: dict[fx.Node, str], d: ChainLanguage) -> str | None:
    """``op``'s form over the node's operands, or None when one has no expression here."""
    operands = [_operand(x, env, d) for x in args]
    if not all(operands):
        return None
    return d.forms[op.name].format(**dict(zip("ab", operands, strict=False)))


def _clamp(a: str | None, low: object, high: object, d: ChainLanguage) -> str | None:
    """``a`` kept within [low, high] (either may be None: unbounded on that side)."""
    if not a or (low is None and high is None):
        return None
    out: str | None = a
    for bound, name in ((low, CLAMP_MIN), (high, CLAMP_MAX)):
        if bound is not None and out:
            text = literal(bound, d)
            out = d.forms[name].format(a=out, b=text) if text else None
    return out


def chained_op(node: fx.Node) -> str | None:
    """The name of the table's op whose form writes the node (GELU's by its ``approximate``;
    torch.clamp's as ``CLAMP_MIN``, whose bounds' forms hold no math), or None."""
    if node.op == "call_method":
        op = METHODS.get(str(node.target))
    else:
        op = FUNCTIONS.get(node.target) if callable(node.target) else None
    if op is not None and op.name == GELU and node.kwargs.get("approximate") == "tanh":
        return GELU_TANH
    return None if op is None else op.name


def expression(node: fx.Node, env: dict[fx.Node, str], d: ChainLanguage) -> str | None:
    """The node's value in language ``d``, or None when it is not an elementwise op handled here."""
    t, args, kw = node.target, node.args, node.kwargs
    if node.op == "call_method":
        op = METHODS.get(str(t))
        if op is None or len(args) != op.arity or kw:
            return None
        return _written(op, args, env, d)
    op = FUNCTIONS.get(t) if callable(t) else None
    if op is None:
        return None
    if op.name == GELU:
        a, approx = (_operand(args[0], env, d) if len(args) == 1 else None), kw.get("approximate", "none")
        return gelu(a, str(approx), d) if a and approx in ("none", "tanh") else None
    if op.name == CLAMP_MIN:  # torch.clamp, torch.clip: the lower bound's form, then the upper's
        return _clamp(_operand(args[0], env, d), kw.get("min"), kw.get("max"), d) if len(args) == 1 else None
    # a unary function may say inplace=False (F.relu does); nothing else changes what it computes
    if len(args) != op.arity or (kw and (op.arity != 1 or kw != {"inplace": False})):
        return None
    return _written(op, args, env, d)
