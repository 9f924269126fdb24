"""One op of the built-in agent, as a record: what it is in no language, and how each of the
agent's two kernel languages writes it (``CppForms``, ``TritonForms``). The table of them is
``table.OPS``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from forge.agents.builtin.ops.cpp_math import CppMath


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


# operands, the result's C++ type -> the expression
CppForm = Callable[[Operands, str], str]
Cast = Callable[[str], str]  # an expression -> it as the node's dtype
# operands, their cast to the node's dtype -> the expression
TritonForm = Callable[[Operands, Cast], str]


@dataclass(frozen=True)
class CppForms:
    """How C++ writes the op. ``lowered``: the general lowering's, typed, from operands already of
    the node's dtype (None: a composite it never sees); ``chain``: the pointwise family's, over
    {a} and {b}, on float values and uncast (None: not one it writes); ``math``: the vectorisable
    functions either form calls (a program includes their definitions)."""

    lowered: CppForm | None = None
    chain: str | None = None
    math: frozenset[CppMath] = frozenset()


@dataclass(frozen=True)
class TritonForms:
    """How Triton writes the op, with the same two forms as ``CppForms`` (``lowered`` None: the
    lowering refuses it by name, or a composite it never sees)."""

    lowered: TritonForm | None = None
    chain: str | None = None


@dataclass(frozen=True)
class Op:
    name: str  # as the trace names it (``trace.packet_name``)
    cpp: CppForms
    triton: TritonForms
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
