"""The built-in agent's pointwise ops: one record per op (``record.Op``) in one table
(``table.OPS``), each with its C++ forms (``cpp_forms``, calling the vectorisable float math of
``cpp_math``) and its Triton forms (``triton_forms``)."""

from forge.agents.builtin.ops.cpp_math import ERF, CppMath, cpp_math_source
from forge.agents.builtin.ops.record import CppForms, NoForm, Op, Operands, TritonForms
from forge.agents.builtin.ops.table import (
    CLAMP_MAX,
    CLAMP_MIN,
    COSTLY,
    FUNCTIONS,
    GELU,
    GELU_TANH,
    METHODS,
    OPS,
    PRIMITIVES,
    cpp_math_of,
)
from forge.agents.builtin.ops.triton_forms import HELPERS, NOT_YET

__all__ = [
    "CLAMP_MAX",
    "CLAMP_MIN",
    "COSTLY",
    "ERF",
    "FUNCTIONS",
    "GELU",
    "GELU_TANH",
    "HELPERS",
    "METHODS",
    "NOT_YET",
    "OPS",
    "PRIMITIVES",
    "CppForms",
    "CppMath",
    "NoForm",
    "Op",
    "Operands",
    "TritonForms",
    "cpp_math_of",
    "cpp_math_source",
]
