"""Pointwise primitives as typed C++ expressions (the lowering's scalar code): each node's form
from the C++ op table (each op's ``cpp`` forms in ``ops.OPS``), over operands that are already C++ expressions of
their nodes' dtypes (``ir.CTYPES``).
"""

from __future__ import annotations

from typing import Any

from torch import fx

from forge.agents.builtin.lowering.ir import Unsupported, ctype_of, dtype_of, literal, operand_dtype, pointwise_value
from forge.agents.builtin.lowering.trace import packet_name
from forge.agents.builtin.ops import OPS


def scalar_operand(value: Any, node: fx.Node) -> str:
    """A Python-number argument of a pointwise node as a literal in the node's operand dtype."""
    name = packet_name(node)
    op = OPS.get(name)
    dtype = operand_dtype(node) if op is not None and op.comparison else dtype_of(node)
    if isinstance(value, bool | int | float):
        return literal(value, dtype)
    raise Unsupported(f"{name}: argument {value!r} is not a tensor or number")


def expression(node: fx.Node, ops: list[str]) -> str:
    """The C++ expression of pointwise ``node`` whose value operands are ``ops`` (C++ text)."""
    name = packet_name(node)
    ct = ctype_of(dtype_of(node), name)
    form = OPS[name].cpp.lowered if name in OPS else None
    written = None if form is None else (lambda x: form(x, ct))
    return pointwise_value(node, ops, written, "not a pointwise primitive the lowering emits")
