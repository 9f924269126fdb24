"""The built-in coder's residual-add + norm family: ``h = x + residual`` then a layernorm or RMSNorm
of ``h`` over the last dimension, returning the norm and, usually, ``h`` as well (the pre-norm
transformer step: the normalised activations and the updated residual stream).

Eager runs this as two kernels: the add reads two tensors and writes ``h``, the norm reads ``h``
back from memory and writes its output. The fused C++ kernel reads each input once and writes
each output once; a row of ``h`` is normalised while it is still in cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from forge.agents.builtin.cpp_snippets import HEADER, REDUCE, WRITE
from forge.agents.builtin.py_snippets import ATTR_HELPERS
from forge.agents.builtin.rowwise import (
    RowRecipe,
    call_name,
    eps_source,
    graph_calls,
    match_norm,
    norm_param_args,
)


@dataclass(frozen=True)
class ResidualNormRecipe:
    norm: RowRecipe  # kind "layernorm" or "rmsnorm", with the module's weight, bias and eps
    outputs: tuple[str, ...]  # "sum" (h) and "norm", in the order the reference returns them
    single: bool = False  # the reference returns one tensor rather than a tuple

    @property
    def wants_sum(self) -> bool:
        return "sum" in self.outputs


def analyze(model: torch.nn.Module, inputs: list[Any]) -> ResidualNormRecipe | str:
    """A recipe, or the reason this op is not a residual add followed by a norm."""
    if len(inputs) != 2 or not all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in inputs):
        return "the residual-norm kernels take two float32 inputs"
    if inputs[0].shape != inputs[1].shape or inputs[0].dim() == 0:
        return "the residual-norm kernels take two inputs of the same shape"
    try:
        gm = fx.symbolic_trace(model)
    except Exception as exc:
        return f"torch.fx could not trace the reference ({type(exc).__name__}: {exc})"
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    calls = graph_calls(gm.graph)
    names = [call_name(n) for n in calls]
    why = f"not a residual add followed by a norm (traced ops: {', '.join(names) or 'none'})"
    if len(placeholders) != 2 or not calls or names[0] != "add" or calls[0].kwargs:
        return why
    add = calls[0]
    # both inputs feed the add and nothing else, so the norm can only be computed from the sum
    if set(add.args) != set(placeholders) or any(set(p.users) != {add} for p in placeholders):
        return why
    norm = match_norm(gm, model, calls[1:], inputs[0].dim(), inputs[0].shape[-1])
    if norm is None or calls[1].args[:1] != (add,):
        return why
    (out,) = [n for n in gm.graph.nodes if n.op == "output"]
    result = out.args[0]
    single = isinstance(result, fx.Node)
    items = [result] if single else list(result) if isinstance(result, (tuple, list)) else []
    outputs = []
    for item in items:
        if item is add:
            outputs.append("sum")
        elif item is calls[-1]:
            outputs.append("norm")
        else:
            return why
    if "norm" not in outputs:
        return why
    return ResidualNormRecipe(norm, tuple(outputs), single)


RESIDUAL_DEFAULT: dict[str, Any] = {"acc": "double", "stream": False, "threads": 0}


def space(recipe: ResidualNormRecipe) -> dict[str, list[Any]]:
    """The tuner's knobs (defaults first): the statistics' accumulator, streamed (non-temporal)
    stores of both outputs, the thread count (0: all)."""
    return {"acc": ["double", "float"], "stream": [False, True], "threads": [0, 1]}


_STATS = {
    "layernorm": """        const float mean = (float)(s / (ACC)cols);
        const ACC q = forge_sum<ACC>(cols, [&](int64_t c) { float d = t[c] - mean; return d * d; });
        const float rstd = (float)(1.0 / std::sqrt((double)q / (double)cols + eps));
""",
    "rmsnorm": """        const float mean = 0.0f;
        const float rstd = (float)(1.0 / std::sqrt((double)s / (double)cols + eps));
""",
}


def residual_cpp(kind: str, cfg: dict[str, Any]) -> str:
    """The kernel: per row, h = x + res (into h, or into a per-thread row buffer when h is not
    wanted or its stores are streamed), the statistics over it, then the normalised output."""
    cfg = {**RESIDUAL_DEFAULT, **cfg}
    acc = "double" if cfg["acc"] == "double" else "float"
    stream = "true" if cfg["stream"] else "false"
    threads = int(cfg["threads"] or 0)
    clause = f" num_threads({threads})" if threads > 0 else ""
    term = "v" if kind == "layernorm" else "v * v"
    body = f"""
extern "C" void kernel(const float* x, const float* res, const float* w, const float* b, float* h, float* y,
                       int64_t rows, int64_t cols, double eps) {{
    const bool buffered = h == nullptr || {stream};
    #pragma omp parallel{clause}
    {{
        std::vector<float> row(buffered ? cols : 0);
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {{
            const float* xr = x + r * cols;
            const float* rr = res + r * cols;
            float* t = buffered ? row.data() : h + r * cols;
            const ACC s = forge_sum<ACC>(cols, [&](int64_t c) {{
                const float v = xr[c] + rr[c];
                t[c] = v;
                return {term};
            }});
{_STATS[kind]}            if (h != nullptr && buffered)
                forge_write(h + r * cols, cols, {stream}, [&](int64_t c) {{ return t[c]; }});
            forge_write(y + r * cols, cols, {stream}, [&](int64_t c) {{
                return (t[c] - mean) * rstd * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f);
            }});
        }}
    }}
    if ({stream}) forge_fence();
}}
"""
    return HEADER + "#include <vector>\n" + WRITE + REDUCE + body.replace("ACC", acc)


def returns(recipe: ResidualNormRecipe) -> str:
    """The ``return`` expression of ``forward`` (h is ``h``, the norm ``y``)."""
    names = ["h" if o == "sum" else "y" for o in recipe.outputs]
    if recipe.single:
        return names[0]
    return f"({', '.join(names)}{',' if len(names) == 1 else ''})"


def render(recipe: ResidualNormRecipe, config: dict[str, Any] | None = None) -> str:
    """The candidate's Python source under ``config`` (knobs from ``space``; defaults otherwise)."""
    cfg = {**RESIDUAL_DEFAULT, **(config or {})}
    shown = {k: cfg[k] for k in space(recipe)}
    params = norm_param_args(recipe.norm)
    if recipe.norm.kind == "rmsnorm":
        params.append("None")  # no bias
    h = "torch.empty_like(x)" if recipe.wants_sum else "None"
    return f'''"""forge built-in coder: residual add + {recipe.norm.kind} in one pass (C++, OpenMP rows, SIMD columns).

Tuned config: {shown!r}
"""

import torch

from forge import cpp
from forge_reference import Model

_lib = cpp.load(r"""{residual_cpp(recipe.norm.kind, cfg)}""")


{ATTR_HELPERS}class ModelNew(Model):
    def forward(self, x, residual):
        x, residual = (t.contiguous() for t in torch.broadcast_tensors(x, residual))
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        h = {h}
        y = torch.empty_like(x)
        _lib.kernel(x, residual, {", ".join(params)}, h, y, rows, cols, {eps_source(recipe.norm)})
        return {returns(recipe)}
'''
