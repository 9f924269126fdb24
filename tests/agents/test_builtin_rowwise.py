"""The built-in coder's row-wise family: recognised from fx traces, emitted as C++, verified."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from forge.agents.builtin import RowRecipe, analyze, render
from forge.core.problem import load_problem
from forge.verifier import verify
from tests.conftest import EXAMPLES, OPS, sweep

KERNELBANK = EXAMPLES / "kernelbank"


def _recipe(op: Path) -> RowRecipe | str:
    p = load_problem(op)
    return analyze(p.model_cls(*p.init_inputs()), p.inputs())


@pytest.mark.parametrize(
    ("op", "kind"),
    [
        (EXAMPLES / "ops" / "softmax.py", "softmax"),
        (EXAMPLES / "ops" / "layernorm.py", "layernorm"),
        (EXAMPLES / "ops" / "rmsnorm.py", "rmsnorm"),
        (EXAMPLES / "ops" / "row_sum.py", "sum"),
    ],
)
def test_recognises_the_shipped_row_wise_examples(op, kind):
    recipe = _recipe(op)
    assert isinstance(recipe, RowRecipe) and recipe.kind == kind


def test_rmsnorm_reads_eps_from_the_instance():
    recipe = _recipe(EXAMPLES / "ops" / "rmsnorm.py")
    assert isinstance(recipe, RowRecipe) and recipe.eps == "eps" and recipe.weight == "weight"


def test_other_ops_get_a_reason():
    why = _recipe(EXAMPLES / "ops" / "linear_gelu.py")
    assert isinstance(why, str) and "not a row-wise op" in why
    assert "float32" in str(analyze(torch.nn.Softmax(dim=-1), [torch.randn(2, 2, dtype=torch.float64)]))


@pytest.mark.parametrize(
    "op",
    sweep(
        [
            OPS / "small_softmax.py",
            OPS / "small_layernorm.py",
            OPS / "declared_shapes.py",
            KERNELBANK / "rmsnorm_op.py",
        ],
        ids=["softmax", "layernorm", "rowsum", "rmsnorm"],
    ),
)
def test_generated_kernels_pass_the_verifier(op, fast_settings, tmp_path, monkeypatch):
    monkeypatch.chdir(op.parent)  # the rmsnorm op imports its Model from the user's package there
    recipe = _recipe(op)
    assert isinstance(recipe, RowRecipe), recipe
    cand = tmp_path / "candidate.py"
    cand.write_text(render(recipe))
    v = verify(op, cand, fast_settings)
    assert v.status == "passed", (v.reason, v.candidate_output[-2000:])
    assert v.backend == "cpp"


OP_TEMPLATE = """
import torch
import torch.nn as nn

rows = 24
cols = 300


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    ("expr", "kind"),
    sweep(
        [
            ("torch.log_softmax(x, dim=-1)", "log_softmax"),
            ("x.amax(dim=1)", "amax"),
            ("x.mean(dim=-1, keepdim=True)", "mean"),
            ("torch.logsumexp(x, dim=1)", "logsumexp"),
        ]
    ),
)
def test_other_row_wise_kinds_pass_the_verifier(expr, kind, fast_settings, tmp_path):
    op = tmp_path / f"{kind}_op.py"
    op.write_text(OP_TEMPLATE.format(expr=expr))
    recipe = _recipe(op)
    assert isinstance(recipe, RowRecipe) and recipe.kind == kind, recipe
    cand = tmp_path / "candidate.py"
    cand.write_text(render(recipe))
    v = verify(op, cand, fast_settings)
    assert v.status == "passed", (v.reason, v.candidate_output[-2000:])


@pytest.mark.parametrize(
    ("expr", "config"),
    sweep(
        [
            ("torch.softmax(x, dim=1)", {"stream": True, "softmax": "recompute", "threads": 1}),
            ("torch.softmax(x, dim=1)", {"stream": True, "prefetch": False}),
            ("layernorm module", {"acc": "float", "stream": True}),
            ("layernorm module", {"moments": "one_pass", "stream": True}),
            ("x.sum(dim=-1)", {"interleave": 8, "acc": "float"}),
            ("x.amax(dim=-1)", {"interleave": 2, "threads": 1}),
        ]
    ),
)
def test_tuned_configs_are_correct_too(expr, config, fast_settings, tmp_path):
    """The tuner's non-default knob values generate different code; it must pass the same checks."""
    op = OPS / "small_layernorm.py"
    if expr != "layernorm module":
        op = tmp_path / "op.py"
        text = OP_TEMPLATE.format(expr=expr).replace("rows = 24", "rows = 43")
        op.write_text(text.replace("cols = 300", "cols = 512"))
    recipe = _recipe(op)
    assert isinstance(recipe, RowRecipe), recipe
    source = render(recipe, config)
    assert "_mm256_stream_ps" in source and "Tuned config" in source
    cand = tmp_path / "candidate.py"
    cand.write_text(source)
    v = verify(op, cand, fast_settings)
    assert v.status == "passed", (v.reason, v.candidate_output[-2000:])


def test_rmsnorm_module_without_weight_or_eps(fast_settings, tmp_path):
    """nn.RMSNorm with no affine weight and eps=None (float32's machine epsilon) gets a null
    weight pointer and the epsilon torch uses."""
    op = tmp_path / "rms_module_op.py"
    op.write_text(
        OP_TEMPLATE.replace(
            "class Model(nn.Module):\n",
            "class Model(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.norm = nn.RMSNorm(cols, elementwise_affine=False)\n\n",
        ).format(expr="self.norm(x)")
    )
    recipe = _recipe(op)
    assert isinstance(recipe, RowRecipe) and recipe.kind == "rmsnorm" and recipe.weight is None, recipe
    assert recipe.eps == torch.finfo(torch.float32).eps
    cand = tmp_path / "candidate.py"
    cand.write_text(render(recipe))
    v = verify(op, cand, fast_settings)
    assert v.status == "passed", (v.reason, v.candidate_output[-2000:])


@pytest.mark.parametrize("moments", ["two_pass", "one_pass"])
def test_layernorm_rows_with_inf_or_nan_are_all_nan_like_torch(moments, cache_dir, monkeypatch):
    """With an inf in the row, sum and sum of squares are inf and their difference NaN: the
    variance must stay NaN (clamping it to 0 would turn the finite entries into -inf)."""
    from forge import cpp
    from forge.agents.builtin.cpp_snippets import HEADER, REDUCE, WRITE, rowwise_cpp
    from forge.agents.builtin.ops import CppMath, cpp_math_source

    monkeypatch.setenv("FORGE_CACHE_DIR", str(cache_dir))
    lib = cpp.load(
        HEADER + WRITE + REDUCE + cpp_math_source({CppMath.EXP}) + rowwise_cpp("layernorm", {"moments": moments})
    )
    x = torch.randn(3, 40)
    x[1, 5], x[2, 7] = float("inf"), float("nan")
    y = torch.empty_like(x)
    lib.kernel(x, None, None, y, 3, 40, 1e-5)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (40,), eps=1e-5), equal_nan=True)


@pytest.mark.parametrize("kind", ["sum", "mean", "amax"])
@pytest.mark.parametrize("interleave", [1, 2, 4, 8])
def test_interleaved_reductions_match_torch_on_awkward_shapes(kind, interleave, cache_dir, monkeypatch):
    """Rows reduced side by side: row counts that leave a partial block (the rows after it are
    reduced one at a time), columns that are not a multiple of the partials, NaN and inf in
    place, an empty set of rows."""
    from forge import cpp
    from forge.agents.builtin.cpp_snippets import HEADER, REDUCE, WRITE, rowwise_cpp
    from forge.agents.builtin.ops import CppMath, cpp_math_source

    monkeypatch.setenv("FORGE_CACHE_DIR", str(cache_dir))
    for acc in ("double", "float"):
        lib = cpp.load(
            HEADER
            + WRITE
            + REDUCE
            + cpp_math_source({CppMath.EXP})
            + rowwise_cpp(kind, {"interleave": interleave, "acc": acc})
        )
        for rows, cols in [(23, 300), (9, 4096), (1, 7), (0, 5)]:
            x = torch.randn(rows, cols)
            if rows > 5:
                x[3, cols - 1], x[rows - 1, 2], x[5, 0] = float("nan"), float("inf"), -float("inf")
                x[1, 0], x[1, 1:] = float("nan"), 1e6  # a NaN first in its lane, larger values after
            y = torch.full((rows,), 123.0)
            lib.kernel(x, y, rows, cols)
            expected = {"sum": x.sum(-1), "mean": x.mean(-1), "amax": x.amax(-1)}[kind]
            torch.testing.assert_close(y, expected, equal_nan=True, rtol=1e-5, atol=1e-4)


def test_interleave_is_a_knob_of_the_one_pass_reductions_only():
    from forge.agents.builtin.cpp_snippets import ROW_DEFAULT, ROW_KINDS
    from forge.agents.builtin.rowwise import space

    for kind in ("sum", "mean", "amax"):
        assert 1 in space(RowRecipe(kind))["interleave"]
    for kind in ("softmax", "layernorm", "logsumexp"):
        assert "interleave" not in space(RowRecipe(kind))
    # the C++ fallbacks (ROW_DEFAULT) are the tuner's defaults: a config the tuner leaves out
    # renders the kernel the tuner measured as the default
    for kind in ROW_KINDS:
        for knob, values in space(RowRecipe(kind)).items():
            assert ROW_DEFAULT[knob] == values[0], (kind, knob)
    with pytest.raises(ValueError, match="interleave"):
        render(RowRecipe("sum"), {"interleave": 3})
