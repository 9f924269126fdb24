"""Pointwise primitives as Triton expressions (the lowering's scalar code for CUDA devices): the
twin of ``cpp_expr``, each node's form from the Triton op table (each op's ``triton`` forms in ``ops.OPS``) over
operands that are already Triton values of their nodes' dtypes, the result cast to the node's own
dtype (``.to(tl.<dtype>)``). Index expressions come from ``ir`` in C syntax, where ``/`` on indices
is integer division; ``index`` writes them for Triton.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.ir import Unsupported, dtype_of, is_float, pointwise_value
from forge.agents.builtin.lowering.trace import packet_name
from forge.agents.builtin.ops import NOT_YET, OPS

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
    op = OPS.get(name)
    comparison = op is not None and op.comparison
    if comparison and isinstance(value, float):  # the operand's type, not the node's (bool)
        return tl_literal(value, torch.float64)
    if comparison:
        return str(int(value))
    return tl_literal(value, dtype_of(node))


def expression(node: fx.Node, ops: list[str]) -> str:
    """The Triton expression of pointwise ``node`` whose value operands are ``ops``."""
    name, dtype = packet_name(node), dtype_of(node)
    form = OPS[name].triton.lowered if name in OPS else None
    written = None if form is None else (lambda x: form(x, lambda expr: _cast(expr, dtype, name)))
    return pointwise_value(node, ops, written, NOT_YET)
