"""The built-in agent's op table (``ops.OPS``): each op's record has the forms its walkers ask
for in both languages, each form writes its operands, and the vectorisable C++ functions a record
says its forms call are the ones they call (a program includes those and no others)."""

from __future__ import annotations

import re

import pytest
import torch

from forge.agents.builtin.ops import (
    COSTLY,
    FUNCTIONS,
    METHODS,
    OPS,
    PRIMITIVES,
    NoForm,
    Operands,
    cpp_math_of,
    cpp_math_source,
)

LANGUAGES = {"cpp": lambda name: OPS[name].cpp, "triton": lambda name: OPS[name].triton}
# ops the pointwise family reads: those its trace shows, and the formulas it picks by a call's options
CHAINED = sorted({op.name for op in (*FUNCTIONS.values(), *METHODS.values())} | (set(OPS) - PRIMITIVES))
OPERANDS = Operands("x0", "x1", "x2", torch.float32, None, lambda: torch.float32)
MATH_CALL = re.compile(r"\b(forge_\w+)\(")


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_the_cpu_lowering_writes_every_primitive_on_floats(name):
    form = OPS[name].cpp.lowered
    assert form is not None, f"{name} is in the lowering's node set but C++ has no form for it"
    _writes_its_operands(form(OPERANDS, "float"), OPS[name].arity)


# The primitives the Triton lowering has no form for ("<name>: no Triton form in the lowering yet"),
# and those it refuses on float operands, saying why: any other is written
NO_TRITON_FORM = {"prims.atan", "prims.atan2"}
TRITON_REFUSES = {"prims.fmod", "prims.pow", "prims.remainder"}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_the_triton_lowering_writes_a_primitive_or_refuses_it_by_name(name):
    form = OPS[name].triton.lowered
    assert (form is None) is (name in NO_TRITON_FORM), f"{name}: a Triton form {'appeared' if form else 'vanished'}"
    if form is None:
        return
    if name in TRITON_REFUSES:
        with pytest.raises(NoForm, match=r"\S"):
            form(OPERANDS, lambda expr: f"({expr}).to(tl.float32)")
        return
    _writes_its_operands(form(OPERANDS, lambda expr: f"({expr}).to(tl.float32)"), OPS[name].arity)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", CHAINED)
def test_every_op_the_pointwise_family_reads_has_a_chain_form(name, language):
    chain = LANGUAGES[language](name).chain
    assert chain is not None, f"the pointwise family reads {name} but the {language} table has no chain form"
    _writes_its_operands(chain.format(a="x0", b="x1"), OPS[name].arity)


@pytest.mark.parametrize("language", LANGUAGES)
def test_composites_are_written_by_the_pointwise_family_only(language):
    assert not [n for n in set(OPS) - PRIMITIVES if LANGUAGES[language](n).lowered is not None]


def test_the_derived_sets_come_from_the_table():
    assert COSTLY <= PRIMITIVES and {"prims.exp", "prims.tanh", "prims.pow"} <= COSTLY
    assert {op.arity for op in OPS.values()} == {1, 2, 3} and OPS["prims.where"].arity == 3
    assert FUNCTIONS[torch.relu].name == "aten.relu" and METHODS["add"].name == "prims.add"


@pytest.mark.parametrize("name", sorted(OPS))
def test_an_ops_cpp_forms_call_the_math_its_record_names(name):
    forms = OPS[name].cpp
    written = [forms.chain or ""]
    if forms.lowered is not None:
        written.append(forms.lowered(OPERANDS, "float"))
    called = {m for text in written for m in MATH_CALL.findall(text)}
    assert called == {math.value for math in forms.math}, f"{name} calls {called}, its record names {forms.math}"


def test_a_program_includes_the_math_its_ops_call_and_what_that_calls():
    exact_gelu = cpp_math_source(cpp_math_of(["aten.gelu", "prims.add"]))  # erf's "torch" form calls exp
    assert {"forge_erf", "forge_exp"} == set(re.findall(r"float (forge_\w+)\(", exact_gelu))
    rational = cpp_math_source(cpp_math_of(["aten.gelu"]), "rational")
    assert set(re.findall(r"float (forge_\w+)\(", rational)) == {"forge_erf"}
    log1p = cpp_math_source(cpp_math_of(["prims.log1p"]))  # defined after log, which it calls
    assert log1p.index("float forge_log(") < log1p.index("float forge_log1p(")
    assert cpp_math_source(cpp_math_of(["aten.relu", "prims.add", "aten.sum"])) == ""


def _writes_its_operands(text: str, arity: int) -> None:
    assert "{" not in text and "}" not in text, text
    for k in range(arity):
        assert re.search(rf"\bx{k}\b", text), (k, text)
