"""The built-in agent's op tables hold the same ops: every op of the shared table
(``op_table.OPS``) has an entry in each language's table (``cpp_ops.CPP_OPS``,
``triton_ops.TRITON_OPS``) and no language's table holds an op the shared one lacks; each entry
has the forms its walkers ask for, and each form writes its operands."""

from __future__ import annotations

import re

import pytest
import torch

from forge.agents.builtin.cpp_ops import CPP_OPS
from forge.agents.builtin.op_table import COSTLY, FUNCTIONS, METHODS, OPS, PRIMITIVES, NoForm, Operands
from forge.agents.builtin.triton_ops import TRITON_OPS

LANGUAGES = {"cpp": CPP_OPS, "triton": TRITON_OPS}
IN_A_LANGUAGE = [(language, name) for language, table in LANGUAGES.items() for name in sorted(table)]
# ops the pointwise family reads: those its trace shows, and the formulas it picks by a call's options
CHAINED = sorted({op.name for op in (*FUNCTIONS.values(), *METHODS.values())} | (set(OPS) - PRIMITIVES))
OPERANDS = Operands("x0", "x1", "x2", torch.float32, None, lambda: torch.float32)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_of_the_shared_table_is_in_every_languages_table(name, language):
    assert name in LANGUAGES[language], f"{name} is in op_table.OPS but not in the {language} table"


@pytest.mark.parametrize(("language", "name"), IN_A_LANGUAGE)
def test_no_languages_table_holds_an_op_the_shared_table_lacks(language, name):
    assert name in OPS, f"the {language} table writes {name}, which op_table.OPS does not hold"


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_the_cpu_lowering_writes_every_primitive_on_floats(name):
    form = CPP_OPS[name].lowered
    assert form is not None, f"{name} is in the lowering's node set but C++ has no form for it"
    _writes_its_operands(form(OPERANDS, "float"), OPS[name].arity)


# The primitives the Triton lowering has no form for ("<name>: no Triton form in the lowering yet"),
# and those it refuses on float operands, saying why: any other is written
NO_TRITON_FORM = {"prims.atan", "prims.atan2"}
TRITON_REFUSES = {"prims.fmod", "prims.pow", "prims.remainder"}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_the_triton_lowering_writes_a_primitive_or_refuses_it_by_name(name):
    form = TRITON_OPS[name].lowered
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
    chain = LANGUAGES[language][name].chain
    assert chain is not None, f"the pointwise family reads {name} but the {language} table has no chain form"
    _writes_its_operands(chain.format(a="x0", b="x1"), OPS[name].arity)


@pytest.mark.parametrize("language", LANGUAGES)
def test_composites_are_written_by_the_pointwise_family_only(language):
    assert not [n for n in set(OPS) - PRIMITIVES if LANGUAGES[language][n].lowered is not None]


def test_the_derived_sets_come_from_the_table():
    assert COSTLY <= PRIMITIVES and {"prims.exp", "prims.tanh", "prims.pow"} <= COSTLY
    assert {op.arity for op in OPS.values()} == {1, 2, 3} and OPS["prims.where"].arity == 3
    assert FUNCTIONS[torch.relu].name == "aten.relu" and METHODS["add"].name == "prims.add"


def _writes_its_operands(text: str, arity: int) -> None:
    assert "{" not in text and "}" not in text, text
    for k in range(arity):
        assert re.search(rf"\bx{k}\b", text), (k, text)
