"""The pointwise ops the built-in agent understands: one table (``OPS``) of one record per op
(``record.Op``), keyed by the name the trace gives each op, each holding what the op is in no
language and how C++ and Triton write it. ``prims.*`` are the primitives of the general
lowering's node set (what ``make_fx`` with torch's decompositions leaves); ``aten.*`` are
composites that only the pointwise family writes whole (``fx.symbolic_trace`` keeps
``torch.relu`` or ``F.gelu`` as one call).

What the other modules need is derived from ``OPS`` here, never listed again: the trace's
pointwise node set (``PRIMITIVES``), the values worth storing rather than computing twice
(``COSTLY``, for row fusion), the torch callables and Tensor methods the pointwise family reads
(``FUNCTIONS``, ``METHODS``), and the vectorisable C++ functions a program's ops call
(``cpp_math_of``).

Adding an op: its record here, with its forms (builders in ``cpp_forms`` and ``triton_forms``),
and ``tests/agents/test_op_table.py`` checks each form writes its operands.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F

from forge.agents.builtin.ops import cpp_forms as cpp
from forge.agents.builtin.ops import triton_forms as tri
from forge.agents.builtin.ops.cpp_math import CppMath
from forge.agents.builtin.ops.record import CppForms, Op, TritonForms


def _float_only(name: str, cpp_forms: CppForms, triton_forms: TritonForms, costly: bool = False) -> Op:
    return Op(f"prims.{name}", cpp_forms, triton_forms, floats_only=True, costly=costly)


def _binary(name: str, cpp_forms: CppForms, triton_forms: TritonForms, **kwargs: Any) -> Op:
    return Op(f"prims.{name}", cpp_forms, triton_forms, arity=2, **kwargs)


def _compare(name: str, cpp_forms: CppForms, triton_forms: TritonForms) -> Op:
    return Op(f"prims.{name}", cpp_forms, triton_forms, arity=2, comparison=True)


# GELU's tanh approximation and clamp's two bounds are formulas of their own in every language:
# an entry each, which the pointwise family picks by the call's options
GELU, GELU_TANH = "aten.gelu", "aten.gelu(approximate=tanh)"
CLAMP_MIN, CLAMP_MAX = "aten.clamp_min", "aten.clamp_max"

_TABLE = (
    _binary(
        "add",
        CppForms(cpp.typed_operator("{a} + {b}"), chain="({a} + {b})"),
        TritonForms(tri.typed_operator("{a} + {b}"), chain="({a} + {b})"),
        functions=(operator.add, torch.add),
        methods=("add",),
    ),
    _binary(
        "sub",
        CppForms(cpp.typed_operator("{a} - {b}"), chain="({a} - {b})"),
        TritonForms(tri.typed_operator("{a} - {b}"), chain="({a} - {b})"),
        functions=(operator.sub, torch.sub),
        methods=("sub",),
    ),
    _binary(
        "mul",
        CppForms(cpp.typed_operator("{a} * {b}"), chain="({a} * {b})"),
        TritonForms(tri.typed_operator("{a} * {b}"), chain="({a} * {b})"),
        functions=(operator.mul, torch.mul),
        methods=("mul",),
    ),
    # on integers prims.div truncates, as C++'s / and Triton's // do
    _binary(
        "div",
        CppForms(cpp.typed_operator("{a} / {b}"), chain="({a} / {b})"),
        TritonForms(tri.divide, chain="({a} / {b})"),
        functions=(operator.truediv, torch.div),
        methods=("div",),
    ),
    _binary("pow", CppForms(cpp.power), TritonForms(tri.power), costly=True),
    _binary("maximum", CppForms(cpp.extreme(">")), TritonForms(tri.extreme(">"))),
    _binary("minimum", CppForms(cpp.extreme("<")), TritonForms(tri.extreme("<"))),
    _binary("bitwise_or", CppForms(cpp.typed_operator("{a} | {b}")), TritonForms(tri.typed_operator("{a} | {b}"))),
    _binary("bitwise_and", CppForms(cpp.typed_operator("{a} & {b}")), TritonForms(tri.typed_operator("{a} & {b}"))),
    _binary("bitwise_xor", CppForms(cpp.typed_operator("{a} ^ {b}")), TritonForms(tri.typed_operator("{a} ^ {b}"))),
    _binary("fmod", CppForms(cpp.fmod), TritonForms(tri.fmod)),
    _binary("atan2", CppForms(cpp.plain("std::atan2({a}, {b})")), TritonForms()),
    _binary("remainder", CppForms(cpp.remainder), TritonForms(tri.remainder)),
    _compare("eq", CppForms(cpp.plain("({a} == {b})")), TritonForms(tri.plain("({a} == {b})"))),
    _compare("ne", CppForms(cpp.plain("({a} != {b})")), TritonForms(tri.plain("({a} != {b})"))),
    _compare("lt", CppForms(cpp.plain("({a} < {b})")), TritonForms(tri.plain("({a} < {b})"))),
    _compare("le", CppForms(cpp.plain("({a} <= {b})")), TritonForms(tri.plain("({a} <= {b})"))),
    _compare("gt", CppForms(cpp.plain("({a} > {b})")), TritonForms(tri.plain("({a} > {b})"))),
    _compare("ge", CppForms(cpp.plain("({a} >= {b})")), TritonForms(tri.plain("({a} >= {b})"))),
    Op(
        "prims.where",
        CppForms(cpp.typed_operator("{a} ? {b} : {c}")),
        TritonForms(tri.typed_operator("tl.where({a}, {b}, {c})")),
        arity=3,
    ),
    Op(
        "prims.neg",
        CppForms(cpp.typed_operator("-{a}"), chain="(-{a})"),
        TritonForms(tri.typed_operator("-{a}"), chain="(-{a})"),
        functions=(torch.neg, operator.neg),
        methods=("neg",),
    ),
    Op(
        "prims.abs",
        CppForms(cpp.absolute, chain="std::fabs({a})"),
        TritonForms(tri.typed_operator("tl.abs({a})"), chain="tl.abs({a})"),
        functions=(torch.abs,),
        methods=("abs",),
    ),
    Op("prims.sign", CppForms(cpp.sign), TritonForms(tri.sign)),
    Op("prims.bitwise_not", CppForms(cpp.bitwise_not), TritonForms(tri.bitwise_not)),
    Op("prims.signbit", CppForms(cpp.signbit), TritonForms(tri.signbit)),
    # the value itself: a copy is what the step's own buffer is
    Op("prims.clone", CppForms(cpp.plain("{a}")), TritonForms(tri.plain("{a}"))),
    Op("prims.convert_element_type", CppForms(cpp.convert), TritonForms(tri.convert)),
    Op(
        "prims.exp",
        CppForms(cpp.floats("forge_exp({a})", "std::exp({a})"), chain="forge_exp({a})", math=frozenset({CppMath.EXP})),
        TritonForms(tri.typed_operator("tl.exp({a})"), chain="tl.exp({a})"),
        floats_only=True,
        costly=True,
        functions=(torch.exp,),
        methods=("exp",),
    ),
    # Triton's tanh from exp(-2|x|): no cancellation near 0 beyond float rounding, +-1 for large |x|
    Op(
        "prims.tanh",
        CppForms(
            cpp.floats("forge_tanh({a})", "std::tanh({a})"), chain="forge_tanh({a})", math=frozenset({CppMath.TANH})
        ),
        TritonForms(tri.typed_operator("_tanh({a})"), chain="(2.0 / (1.0 + tl.exp(-2.0 * {a})) - 1.0)"),
        floats_only=True,
        costly=True,
        functions=(torch.tanh, F.tanh),
        methods=("tanh",),
    ),
    Op(
        "prims.sigmoid",
        CppForms(
            cpp.floats("(1.0f / (1.0f + forge_exp(-{a})))", "(1.0 / (1.0 + std::exp(-{a})))"),
            chain="(1.0f / (1.0f + forge_exp(-{a})))",
            math=frozenset({CppMath.EXP}),
        ),
        TritonForms(tri.typed_operator("tl.sigmoid({a})"), chain="(1.0 / (1.0 + tl.exp(-{a})))"),
        floats_only=True,
        costly=True,
        functions=(torch.sigmoid, F.sigmoid),
        methods=("sigmoid",),
    ),
    Op(
        "prims.sqrt",
        CppForms(cpp.floats("std::sqrt({a})", "std::sqrt({a})"), chain="std::sqrt({a})"),
        TritonForms(tri.typed_operator("tl.sqrt({a})"), chain="tl.sqrt({a})"),
        floats_only=True,
        functions=(torch.sqrt,),
        methods=("sqrt",),
    ),
    Op(
        "prims.rsqrt",
        CppForms(cpp.floats("(1.0f / std::sqrt({a}))", "(1.0 / std::sqrt({a}))"), chain="(1.0f / std::sqrt({a}))"),
        TritonForms(tri.typed_operator("tl.rsqrt({a})"), chain="(1.0 / tl.sqrt({a}))"),
        floats_only=True,
        functions=(torch.rsqrt,),
        methods=("rsqrt",),
    ),
    _float_only(
        "expm1",
        CppForms(cpp.floats("forge_expm1({a})", "std::expm1({a})"), math=frozenset({CppMath.EXPM1})),
        TritonForms(tri.typed_operator("_expm1({a})")),
        costly=True,
    ),
    _float_only(
        "log",
        CppForms(cpp.floats("forge_log({a})", "std::log({a})"), math=frozenset({CppMath.LOG})),
        TritonForms(tri.typed_operator("tl.log({a})")),
        costly=True,
    ),
    _float_only(
        "log1p",
        CppForms(cpp.floats("forge_log1p({a})", "std::log1p({a})"), math=frozenset({CppMath.LOG1P})),
        TritonForms(tri.typed_operator("_log1p({a})")),
        costly=True,
    ),
    _float_only(
        "log2",
        CppForms(cpp.floats("std::log2({a})", "std::log2({a})")),
        TritonForms(tri.typed_operator("tl.log2({a})")),
        costly=True,
    ),
    _float_only(
        "erf",
        CppForms(cpp.floats("forge_erf({a})", "std::erf({a})"), math=frozenset({CppMath.ERF})),
        TritonForms(tri.typed_operator("tl.erf({a})")),
        costly=True,
    ),
    _float_only(
        "sin",
        CppForms(cpp.floats("std::sin({a})", "std::sin({a})")),
        TritonForms(tri.typed_operator("tl.sin({a})")),
        costly=True,
    ),
    _float_only(
        "cos",
        CppForms(cpp.floats("std::cos({a})", "std::cos({a})")),
        TritonForms(tri.typed_operator("tl.cos({a})")),
        costly=True,
    ),
    _float_only("atan", CppForms(cpp.floats("std::atan({a})", "std::atan({a})")), TritonForms(), costly=True),
    # Triton's from expm1 on both sides: no cancellation near 0, inf where exp overflows
    _float_only(
        "sinh",
        CppForms(cpp.floats("std::sinh({a})", "std::sinh({a})")),
        TritonForms(tri.typed_operator("((_expm1({a}) - _expm1(-{a})) * 0.5)")),
        costly=True,
    ),
    _float_only(
        "floor",
        CppForms(cpp.floats("std::floor({a})", "std::floor({a})")),
        TritonForms(tri.typed_operator("tl.floor({a})")),
    ),
    _float_only(
        "ceil",
        CppForms(cpp.floats("std::ceil({a})", "std::ceil({a})")),
        TritonForms(tri.typed_operator("tl.ceil({a})")),
    ),
    # half to even, as torch
    _float_only(
        "round",
        CppForms(cpp.floats("std::nearbyint({a})", "std::nearbyint({a})")),
        TritonForms(tri.typed_operator("_round_even({a})")),
    ),
    _float_only(
        "trunc",
        CppForms(cpp.floats("std::trunc({a})", "std::trunc({a})")),
        TritonForms(tri.typed_operator("tl.where({a} < 0, tl.ceil({a}), tl.floor({a}))")),
    ),
    _float_only(
        "reciprocal",
        CppForms(cpp.floats("(1.0f / {a})", "(1.0 / {a})")),
        TritonForms(tri.typed_operator("(1.0 / {a})")),
    ),
    Op(
        "aten.relu",
        CppForms(chain="({a} < 0.f ? 0.f : {a})"),
        TritonForms(chain="tl.where({a} < 0.0, 0.0, {a})"),
        primitive=False,
        functions=(torch.relu, F.relu),
        methods=("relu",),
    ),
    Op(
        "aten.silu",
        CppForms(chain="({a} / (1.0f + forge_exp(-{a})))", math=frozenset({CppMath.EXP})),
        TritonForms(chain="({a} / (1.0 + tl.exp(-{a})))"),
        primitive=False,
        functions=(F.silu,),
        methods=("silu",),
    ),
    Op(
        GELU,
        CppForms(chain="(0.5f * {a} * (1.0f + forge_erf({a} * 0.7071067811865476f)))", math=frozenset({CppMath.ERF})),
        TritonForms(chain="(0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476)))"),
        primitive=False,
        functions=(F.gelu,),
    ),
    # Triton writes 1 + tanh(z) as 2 / (1 + exp(-2z))
    Op(
        GELU_TANH,
        CppForms(
            chain="(0.5f * {a} * (1.0f + forge_tanh(0.7978845608028654f * ({a} + 0.044715f * {a} * {a} * {a}))))",
            math=frozenset({CppMath.TANH}),
        ),
        TritonForms(
            chain="(0.5 * {a} * (2.0 / (1.0 + tl.exp(-2.0 * 0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a})))))"
        ),
        primitive=False,
    ),
    # {b}: the bound; NaN passes, as torch's; torch.clamp's upper bound is then CLAMP_MAX, where given
    Op(
        CLAMP_MIN,
        CppForms(chain="({a} < {b} ? {b} : {a})"),
        TritonForms(chain="tl.where({a} < {b}, {b}, {a})"),
        primitive=False,
        functions=(torch.clamp, torch.clip),
    ),
    Op(
        CLAMP_MAX,
        CppForms(chain="({a} > {b} ? {b} : {a})"),
        TritonForms(chain="tl.where({a} > {b}, {b}, {a})"),
        primitive=False,
    ),
)
OPS: dict[str, Op] = {op.name: op for op in _TABLE}

PRIMITIVES = frozenset(name for name, op in OPS.items() if op.primitive)
COSTLY = frozenset(name for name, op in OPS.items() if op.costly)
FUNCTIONS: dict[Callable[..., Any], Op] = {f: op for op in _TABLE for f in op.functions}
METHODS: dict[str, Op] = {m: op for op in _TABLE for m in op.methods}


def cpp_math_of(names: Iterable[str]) -> frozenset[CppMath]:
    """The vectorisable functions the C++ forms of the ops ``names`` call (names that are no op
    of the table, a reduction's or a matmul's, call none)."""
    return frozenset(math for name in names if name in OPS for math in OPS[name].cpp.math)
