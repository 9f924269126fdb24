"""The pointwise ops the built-in agent understands: one table (``OPS``), keyed by the name the
trace gives each op. ``prims.*`` are the primitives of the general lowering's node set (what
``make_fx`` with torch's decompositions leaves); ``aten.*`` are composites that only the pointwise
family writes whole (``fx.symbolic_trace`` keeps ``torch.relu`` or ``F.gelu`` as one call).

How a language writes each op is that language's table, keyed the same way: ``cpp_ops.CPP_OPS``
(with the vectorisable float math its forms call) and ``triton_ops.TRITON_OPS`` (with the helpers
its forms call); ``tests/agents/test_op_tables.py`` fails when the three do not hold the same ops.
What the other modules need is derived from ``OPS`` here, never listed again: the trace's
pointwise node set (``PRIMITIVES``), the values worth storing rather than computing twice
(``COSTLY``, for row fusion), each op's count of value arguments (``Op.arity``, for the reader),
and the torch callables and Tensor methods the pointwise family reads (``FUNCTIONS``, ``METHODS``).

Adding an op: an ``Op`` here, its C++ form in ``cpp_ops`` and its Triton form in ``triton_ops``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Op:
    name: str  # as the trace names it (``trace.packet_name``)
    arity: int = 1  # leading arguments that are values (the rest are dtypes or options)
    # in the general lowering's node set; False: a composite the lowering's trace decomposes, which
    # only the pointwise family writes whole
    primitive: bool = True
    floats_only: bool = False  # defined on floating values only: refused on integers
    comparison: bool = False  # a bool result: a number argument takes its operands' type
    costly: bool = False  # worth a store and a load from cache rather than computing twice
    # how the pointwise family's trace (``fx.symbolic_trace``) shows it: the callables of its
    # call_function nodes, the Tensor methods of its call_method nodes
    functions: tuple[Callable[..., Any], ...] = ()
    methods: tuple[str, ...] = ()


def _float_only(name: str, costly: bool = False) -> Op:
    return Op(f"prims.{name}", floats_only=True, costly=costly)


def _binary(name: str, **kwargs: Any) -> Op:
    return Op(f"prims.{name}", arity=2, **kwargs)


def _compare(name: str) -> Op:
    return Op(f"prims.{name}", arity=2, comparison=True)


# GELU's tanh approximation and clamp's two bounds are formulas of their own in every language:
# an entry each, which the pointwise family picks by the call's options
GELU, GELU_TANH = "aten.gelu", "aten.gelu(approximate=tanh)"
CLAMP_MIN, CLAMP_MAX = "aten.clamp_min", "aten.clamp_max"

_TABLE = (
    _binary("add", functions=(operator.add, torch.add), methods=("add",)),
    _binary("sub", functions=(operator.sub, torch.sub), methods=("sub",)),
    _binary("mul", functions=(operator.mul, torch.mul), methods=("mul",)),
    _binary("div", functions=(operator.truediv, torch.div), methods=("div",)),
    _binary("pow", costly=True),
    _binary("maximum"),
    _binary("minimum"),
    _binary("bitwise_or"),
    _binary("bitwise_and"),
    _binary("bitwise_xor"),
    _binary("fmod"),
    _binary("atan2"),
    _binary("remainder"),
    _compare("eq"),
    _compare("ne"),
    _compare("lt"),
    _compare("le"),
    _compare("gt"),
    _compare("ge"),
    Op("prims.where", arity=3),
    Op("prims.neg", functions=(torch.neg, operator.neg), methods=("neg",)),
    Op("prims.abs", functions=(torch.abs,), methods=("abs",)),
    Op("prims.sign"),
    Op("prims.bitwise_not"),
    Op("prims.signbit"),
    Op("prims.clone"),
    Op("prims.convert_element_type"),
    Op("prims.exp", floats_only=True, costly=True, functions=(torch.exp,), methods=("exp",)),
    Op("prims.tanh", floats_only=True, costly=True, functions=(torch.tanh, F.tanh), methods=("tanh",)),
    Op("prims.sigmoid", floats_only=True, costly=True, functions=(torch.sigmoid, F.sigmoid), methods=("sigmoid",)),
    Op("prims.sqrt", floats_only=True, functions=(torch.sqrt,), methods=("sqrt",)),
    Op("prims.rsqrt", floats_only=True, functions=(torch.rsqrt,), methods=("rsqrt",)),
    _float_only("expm1", costly=True),
    _float_only("log", costly=True),
    _float_only("log1p", costly=True),
    _float_only("log2", costly=True),
    _float_only("erf", costly=True),
    _float_only("sin", costly=True),
    _float_only("cos", costly=True),
    _float_only("atan", costly=True),
    _float_only("floor"),
    _float_only("ceil"),
    _float_only("round"),
    _float_only("trunc"),
    _float_only("reciprocal"),
    Op("aten.relu", primitive=False, functions=(torch.relu, F.relu), methods=("relu",)),
    Op("aten.silu", primitive=False, functions=(F.silu,), methods=("silu",)),
    Op(GELU, primitive=False, functions=(F.gelu,)),
    Op(GELU_TANH, primitive=False),
    Op(CLAMP_MIN, primitive=False, functions=(torch.clamp, torch.clip)),  # then CLAMP_MAX, where given
    Op(CLAMP_MAX, primitive=False),
)
OPS: dict[str, Op] = {op.name: op for op in _TABLE}

PRIMITIVES = frozenset(name for name, op in OPS.items() if op.primitive)
COSTLY = frozenset(name for name, op in OPS.items() if op.costly)
FUNCTIONS: dict[Callable[..., Any], Op] = {f: op for op in _TABLE for f in op.functions}
METHODS: dict[str, Op] = {m: op for op in _TABLE for m in op.methods}


@dataclass(frozen=True)
class Operands:
    """What a language's form of one op is written from (the walker reading the graph makes it)."""

    a: str = ""  # the value operands, as text of the language
    b: str = ""
    c: str = ""
    dtype: torch.dtype = torch.float32  # the result's
    b_number: Any = None  # the second argument itself where it is a number, not a tensor (pow's exponent)
    # the operands' dtype, asked only by a form that depends on it (signbit's)
    operand_dtype_of: Callable[[], torch.dtype] = field(default=lambda: torch.float32)

    @property
    def floating(self) -> bool:
        return self.dtype in (torch.float32, torch.float64)


class NoForm(Exception):
    """A language has no form for this op on these operands; the message says why."""
