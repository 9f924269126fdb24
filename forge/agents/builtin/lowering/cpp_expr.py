"""Pointwise primitives as typed C++ expressions (the lowering's scalar code).

Every operand is already a C++ expression of its node's dtype (``ir.CTYPES``); the result is cast
to the node's own dtype, so C++'s promotion rules never decide a type torch decided otherwise.
Float math keeps torch's special values: NaN propagates through maximum/minimum and comparisons
are false on NaN, as in torch; exp/erf/tanh use forge's vectorisable forms (``cpp_snippets``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.ir import Unsupported, ctype_of, dtype_of, is_float, literal, operand_dtype
from forge.agents.builtin.lowering.trace import packet_name

_BINARY = {"prims.add": "+", "prims.sub": "-", "prims.mul": "*"}
_COMPARE = {"prims.eq": "==", "prims.ne": "!=", "prims.lt": "<", "prims.le": "<=", "prims.gt": ">", "prims.ge": ">="}
# float-only unary functions: (float form, double form)
_FLOAT_UNARY = {
    "prims.exp": ("forge_exp({a})", "std::exp({a})"),
    "prims.expm1": ("forge_expm1({a})", "std::expm1({a})"),
    "prims.log": ("forge_log({a})", "std::log({a})"),
    "prims.log1p": ("forge_log1p({a})", "std::log1p({a})"),
    "prims.log2": ("std::log2({a})", "std::log2({a})"),
    "prims.erf": ("forge_erf({a})", "std::erf({a})"),
    "prims.tanh": ("forge_tanh({a})", "std::tanh({a})"),
    "prims.sqrt": ("std::sqrt({a})", "std::sqrt({a})"),
    "prims.rsqrt": ("(1.0f / std::sqrt({a}))", "(1.0 / std::sqrt({a}))"),
    "prims.sin": ("std::sin({a})", "std::sin({a})"),
    "prims.cos": ("std::cos({a})", "std::cos({a})"),
    "prims.atan": ("std::atan({a})", "std::atan({a})"),
    "prims.floor": ("std::floor({a})", "std::floor({a})"),
    "prims.ceil": ("std::ceil({a})", "std::ceil({a})"),
    "prims.round": ("std::nearbyint({a})", "std::nearbyint({a})"),  # half to even, as torch
    "prims.trunc": ("std::trunc({a})", "std::trunc({a})"),
    "prims.sigmoid": ("(1.0f / (1.0f + forge_exp(-{a})))", "(1.0 / (1.0 + std::exp(-{a})))"),
    "prims.reciprocal": ("(1.0f / {a})", "(1.0 / {a})"),
}


# Vectorisable float log, log1p and expm1 (libm's are scalar calls, which made ELU and softplus
# 10x slower than eager). log: Cephes' logf reduction and polynomial (about 1 ulp); log1p: the
# log(u) * x / (u - 1) correction of u = 1 + x, exact where u == 1; expm1: a Taylor polynomial
# where exp(x) - 1 would cancel (|x| < 0.35, truncation below 3e-9), exp(x) - 1 elsewhere.
# Special values: log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN propagates.
VECTOR_MATH = r"""
static inline float forge_log(float x) {
    int32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    int32_t e = ((bits >> 23) & 0xff) - 126;
    int32_t mb = (bits & 0x007fffff) | 0x3f000000;
    float m;
    std::memcpy(&m, &mb, sizeof(m));
    // subnormals: scale up by 2^23 first
    const bool sub = x < 1.17549435e-38f;
    float xs = x * 8388608.0f;
    int32_t sbits;
    std::memcpy(&sbits, &xs, sizeof(sbits));
    int32_t se = ((sbits >> 23) & 0xff) - 126 - 23;
    int32_t smb = (sbits & 0x007fffff) | 0x3f000000;
    float sm;
    std::memcpy(&sm, &smb, sizeof(sm));
    m = sub ? sm : m;
    e = sub ? se : e;
    const bool low = m < 0.707106781186547524f;
    float fe = (float)(low ? e - 1 : e);
    float f = low ? m + m - 1.0f : m - 1.0f;
    float z = f * f;
    float p = 7.0376836292e-2f;
    p = p * f - 1.1514610310e-1f;
    p = p * f + 1.1676998740e-1f;
    p = p * f - 1.2420140846e-1f;
    p = p * f + 1.4249322787e-1f;
    p = p * f - 1.6668057665e-1f;
    p = p * f + 2.0000714765e-1f;
    p = p * f - 2.4999993993e-1f;
    p = p * f + 3.3333331174e-1f;
    float r = f * z * p;
    r += -2.12194440e-4f * fe;
    r += -0.5f * z;
    r = f + r + 0.693359375f * fe;
    // one select per special value: an || of conditions stopped GCC vectorising the caller's loop
    r = x == INFINITY ? INFINITY : r;
    r = x == 0.0f ? -INFINITY : r;
    r = x < 0.0f ? NAN : r;
    return x != x ? x : r;
}

static inline float forge_log1p(float x) {
    const float u = 1.0f + x;
    const float d = u - 1.0f;
    const float r = forge_log(u) * (x / (d == 0.0f ? 1.0f : d));
    return d == 0.0f ? x : (u == INFINITY ? u : r);
}

static inline float forge_expm1(float x) {
    const float p = x * (1.0f + x * (0.5f + x * (1.6666667e-1f + x * (4.1666668e-2f + x * (8.3333338e-3f
                    + x * (1.3888889e-3f + x * 1.9841270e-4f))))));
    const float e = forge_exp(x) - 1.0f;
    return (x > -0.35f && x < 0.35f) ? p : e;
}
"""


def _cast(expr: str, ctype: str) -> str:
    return f"(({ctype})({expr}))"


def _pow(a: str, b: Any, node: fx.Node, ct: str) -> str:
    if isinstance(b, int | float) and not isinstance(b, bool):
        if b == 2:
            return f"({a} * {a})"
        if b == 3:
            return f"({a} * {a} * {a})"
        if b == 0.5:
            return f"std::sqrt({a})"
        if b == 1:
            return a
        return f"std::pow({a}, {literal(b, dtype_of(node))})"
    return f"(({ct})std::pow({a}, {b}))"


def scalar_operand(value: Any, node: fx.Node) -> str:
    """A Python-number argument of a pointwise node as a literal in the node's operand dtype."""
    name = packet_name(node)
    dtype = operand_dtype(node) if name in _COMPARE else dtype_of(node)
    if name == "prims.where":
        dtype = dtype_of(node)
    if isinstance(value, bool | int | float):
        return literal(value, dtype)
    raise Unsupported(f"{name}: argument {value!r} is not a tensor or number")


def expression(node: fx.Node, ops: list[str]) -> str:
    """The C++ expression of pointwise ``node`` whose value operands are ``ops`` (C++ text)."""
    name, dtype = packet_name(node), dtype_of(node)
    ct = ctype_of(dtype, name)
    a = ops[0] if ops else ""
    b = ops[1] if len(ops) > 1 else ""
    if name in _BINARY:
        return _cast(f"{a} {_BINARY[name]} {b}", ct)
    if name == "prims.div":  # on integers prims.div truncates, as C++'s / does
        return _cast(f"{a} / {b}", ct)
    if name in _COMPARE:
        return f"({a} {_COMPARE[name]} {b})"
    if name in _FLOAT_UNARY:
        if not is_float(dtype):
            raise Unsupported(f"{name}: on {dtype}")
        form = _FLOAT_UNARY[name][0 if dtype == torch.float32 else 1]
        return form.format(a=a)
    if name == "prims.neg":
        return _cast(f"-{a}", ct)
    if name == "prims.abs":
        return f"std::fabs({a})" if is_float(dtype) else _cast(f"{a} < 0 ? -{a} : {a}", ct)
    if name == "prims.sign":
        return (
            _cast(f"({a} > 0) - ({a} < 0)", ct)
            if not is_float(dtype)
            else (f"({a} != {a} ? {a} : ({ct})(({a} > 0) - ({a} < 0)))")
        )
    if name in ("prims.maximum", "prims.minimum"):
        op = ">" if name == "prims.maximum" else "<"
        if is_float(dtype):  # NaN in either operand gives NaN, as torch.maximum/minimum
            return f"(({a} != {a} || {a} {op} {b}) ? {a} : {b})"
        return f"({a} {op} {b} ? {a} : {b})"
    if name == "prims.pow":
        return _pow(a, node.args[1] if not isinstance(node.args[1], fx.Node) else b, node, ct)
    if name == "prims.where":
        return _cast(f"{a} ? {b} : {ops[2]}", ct)
    if name in ("prims.bitwise_or", "prims.bitwise_and", "prims.bitwise_xor"):
        op = {"prims.bitwise_or": "|", "prims.bitwise_and": "&", "prims.bitwise_xor": "^"}[name]
        return _cast(f"{a} {op} {b}", ct)
    if name == "prims.bitwise_not":
        return f"(!{a})" if dtype == torch.bool else _cast(f"~{a}", ct)
    if name == "prims.clone":  # the value itself: a copy is what the step's own buffer is
        return a
    if name == "prims.convert_element_type":
        return f"({a} != 0)" if dtype == torch.bool else _cast(a, ct)
    if name == "prims.fmod":
        return f"std::fmod({a}, {b})" if is_float(dtype) else _cast(f"{a} % {b}", ct)
    if name == "prims.atan2":
        return f"std::atan2({a}, {b})"
    if name == "prims.remainder":  # Python's: the sign of the divisor
        r = f"std::fmod({a}, {b})" if is_float(dtype) else f"({a} % {b})"
        return _cast(f"({r} != 0 && (({r} < 0) != ({b} < 0)) ? {r} + {b} : {r})", ct)
    if name == "prims.signbit":  # -0.0 and -NaN count, as torch.signbit's do
        return f"std::signbit({a})" if is_float(operand_dtype(node)) else f"({a} < 0)"
    raise Unsupported(f"{name}: not a pointwise primitive the lowering emits")
