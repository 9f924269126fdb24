"""How C++ writes the ops of the built-in agent's table (``table.OPS``): the builders of the
general lowering's typed forms.

A form takes operands already of the node's dtype and casts an operator's result to the node's
type, so that C++'s promotion never decides a type torch decided otherwise; float math keeps
torch's special values (NaN through maximum/minimum, comparisons false on NaN). On float32 it
calls forge's vectorisable functions (``cpp_math``), on float64 libm's (a float-only op shows both
side by side: ``floats``).
"""

from __future__ import annotations

import torch

from forge.agents.builtin.ops.record import CppForm, Operands


def cast(expr: str, ctype: str) -> str:
    return f"(({ctype})({expr}))"


def typed_operator(text: str) -> CppForm:
    """The same operator on every dtype, its result cast to the node's type."""
    return lambda x, ct: cast(text.format(a=x.a, b=x.b, c=x.c), ct)


def plain(text: str) -> CppForm:
    """The same expression on every dtype, already of the node's type."""
    return lambda x, ct: text.format(a=x.a, b=x.b)


def floats(vector: str, scalar: str) -> CppForm:
    """A float-only function: the vectorisable form on float32, libm's on float64."""
    return lambda x, ct: (vector if x.dtype == torch.float32 else scalar).format(a=x.a)


def absolute(x: Operands, ct: str) -> str:
    return f"std::fabs({x.a})" if x.floating else cast(f"{x.a} < 0 ? -{x.a} : {x.a}", ct)


def sign(x: Operands, ct: str) -> str:
    a = x.a
    return f"({a} != {a} ? {a} : ({ct})(({a} > 0) - ({a} < 0)))" if x.floating else cast(f"({a} > 0) - ({a} < 0)", ct)


def extreme(op: str) -> CppForm:
    """maximum (``op`` ">") or minimum ("<"): on floats NaN in either operand gives NaN, as torch's."""

    def form(x: Operands, ct: str) -> str:
        a, b = x.a, x.b
        return f"(({a} != {a} || {a} {op} {b}) ? {a} : {b})" if x.floating else f"({a} {op} {b} ? {a} : {b})"

    return form


def power(x: Operands, ct: str) -> str:
    a, b = x.a, x.b if x.b_number is None else x.b_number
    if isinstance(b, int | float) and not isinstance(b, bool):
        if b == 2:
            return f"({a} * {a})"
        if b == 3:
            return f"({a} * {a} * {a})"
        if b == 0.5:
            return f"std::sqrt({a})"
        if b == 1:
            return a
        return f"std::pow({a}, {x.b})"  # x.b: the exponent as a literal of the node's dtype
    return f"(({ct})std::pow({a}, {b}))"


def bitwise_not(x: Operands, ct: str) -> str:
    return f"(!{x.a})" if x.dtype == torch.bool else cast(f"~{x.a}", ct)


def convert(x: Operands, ct: str) -> str:
    return f"({x.a} != 0)" if x.dtype == torch.bool else cast(x.a, ct)


def fmod(x: Operands, ct: str) -> str:
    return f"std::fmod({x.a}, {x.b})" if x.floating else cast(f"{x.a} % {x.b}", ct)


def remainder(x: Operands, ct: str) -> str:
    """Python's: the sign of the divisor."""
    r = f"std::fmod({x.a}, {x.b})" if x.floating else f"({x.a} % {x.b})"
    return cast(f"({r} != 0 && (({r} < 0) != ({x.b} < 0)) ? {r} + {x.b} : {r})", ct)


def signbit(x: Operands, ct: str) -> str:
    """-0.0 and -NaN count, as torch.signbit's do."""
    dtype = x.operand_dtype_of()
    return f"std::signbit({x.a})" if dtype in (torch.float32, torch.float64) else f"({x.a} < 0)"
