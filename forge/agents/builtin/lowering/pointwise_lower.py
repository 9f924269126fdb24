"""The lowering's first kernel kind: a graph of pointwise primitives on one float32 input, one C++
statement per node, handed to the pointwise family's fused one-pass kernel (its knobs, its tuner).

This takes any activation torch decomposes to primitives (LeakyReLU, ELU, SELU, HardTanh,
HardSigmoid, Softplus, a GELU written out, ...) with no per-op code: comparisons give 0/1 floats,
``where`` selects on them, and NaN checks (``x != x``) stay as they are, so NaN propagates as
torch's does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.trace import packet_name, trace, unloweable
from forge.agents.builtin.pointwise import PointwiseRecipe, plan_of_shapes

_BINARY = {"prims.add": "+", "prims.sub": "-", "prims.mul": "*", "prims.div": "/"}
_COMPARE = {"prims.eq": "==", "prims.ne": "!=", "prims.lt": "<", "prims.le": "<=", "prims.gt": ">", "prims.ge": ">="}
_UNARY = {
    "prims.neg": "(-{a})",
    "prims.abs": "std::fabs({a})",
    "prims.exp": "forge_exp({a})",
    "prims.expm1": "std::expm1({a})",
    "prims.log": "std::log({a})",
    "prims.log1p": "std::log1p({a})",
    "prims.erf": "forge_erf({a})",
    "prims.tanh": "forge_tanh({a})",
    "prims.sqrt": "std::sqrt({a})",
    "prims.rsqrt": "(1.0f / std::sqrt({a}))",
    "prims.sigmoid": "(1.0f / (1.0f + forge_exp(-{a})))",
    "prims.reciprocal": "(1.0f / {a})",
}


def _literal(value: object) -> str | None:
    if isinstance(value, bool):
        return "1.0f" if value else "0.0f"
    if isinstance(value, int | float):
        return f"{float(value)!r}f" if abs(float(value)) != float("inf") and value == value else None
    return None


def _pow(a: str, b: object) -> str:
    if b == 2:
        return f"({a} * {a})"
    if b == 3:
        return f"({a} * {a} * {a})"
    if b == 0.5:
        return f"std::sqrt({a})"
    return f"std::pow({a}, {_literal(b)})"


def _expression(node: fx.Node, operand: Callable[[Any], str | None]) -> str | None:
    """The node as a C++ float expression over earlier values (None: not one handled here)."""
    name, args = packet_name(node), [operand(a) for a in node.args]
    if any(a is None for a in args[:3]) and name != "prims.convert_element_type":
        return None
    if name in _BINARY:
        return f"({args[0]} {_BINARY[name]} {args[1]})"
    if name in _COMPARE:  # a 0/1 float
        return f"(({args[0]} {_COMPARE[name]} {args[1]}) ? 1.0f : 0.0f)"
    if name in _UNARY:
        return _UNARY[name].format(a=args[0])
    if name == "prims.pow" and not isinstance(node.args[1], fx.Node):
        return _pow(str(args[0]), node.args[1])
    if name == "prims.where":
        return f"({args[0]} != 0.0f ? {args[1]} : {args[2]})"
    if name == "prims.bitwise_or":
        return f"(({args[0]} != 0.0f || {args[1]} != 0.0f) ? 1.0f : 0.0f)"
    if name == "prims.bitwise_and":
        return f"(({args[0]} != 0.0f && {args[1]} != 0.0f) ? 1.0f : 0.0f)"
    if name == "prims.convert_element_type" and node.args[1] in (torch.float32, torch.bool):
        a = operand(node.args[0])
        return None if a is None else (a if node.args[1] == torch.float32 else f"({a} != 0.0f ? 1.0f : 0.0f)")
    if name == "prims.view_of":
        return args[0]
    return None


def analyze(model: torch.nn.Module, inputs: list[Any]) -> PointwiseRecipe | str:
    """A pointwise recipe from the traced reference, or why the reference is not such a graph."""
    if len(inputs) != 1 or not isinstance(inputs[0], torch.Tensor) or inputs[0].dtype != torch.float32:
        return "the lowered pointwise kernels take exactly one float32 input"
    try:
        traced = trace(model, inputs)
    except Exception as exc:
        return f"the reference could not be traced ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    if why := unloweable(traced):
        return why[0]
    placeholders = [n for n in traced.graph.graph.nodes if n.op == "placeholder"]
    x = placeholders[-1]
    env: dict[fx.Node, str] = {x: "v"}
    body: list[str] = []

    def operand(a: Any) -> str | None:
        return env.get(a) if isinstance(a, fx.Node) else _literal(a)

    for node in traced.graph.graph.nodes:
        if node.op == "call_function":
            expr = _expression(node, operand)
            if expr is None:
                return f"{packet_name(node)}: not a pointwise primitive on the input (lowered kernels so far)"
            env[node] = f"t{len(body)}"
            body.append(f"float {env[node]} = {expr};")
        elif node.op == "output":
            result = node.args[0]
            if isinstance(result, tuple | list) and len(result) == 1:
                result = result[0]
            if not isinstance(result, fx.Node) or result not in env or not body:
                return "the reference must return one tensor computed from its input"
            shape = tuple(result.meta["val"].shape) if "val" in result.meta else ()
            if shape != tuple(inputs[0].shape):
                return "the output's shape differs from the input's (not a pointwise graph)"
            outer = plan_of_shapes()(shape, ())[0]
            return PointwiseRecipe(tuple(body), env[result], (), None, (), outer)
    return "no output"
