"""Triton kernels for the pointwise family (CUDA devices): the whole elementwise chain in one pass
over the output, parameters gathered through the same outer/inner plan as the C++ kernels (each
parameter constant or contiguous over the inner run; which one is a compile-time flag).

An ``nn.Linear`` in front is done by the library matmul (cuBLAS) and the chain runs in place on its
fresh output, as on CPU.
"""

from __future__ import annotations

from typing import Any

from forge.agents.builtin.pointwise import PLAN_SOURCE, PointwiseRecipe, prologue
from forge.agents.builtin.rowwise import ATTR_SOURCE

TRITON_POINTWISE_DEFAULT: dict[str, Any] = {"block": 1024, "num_warps": 4}


def triton_space(recipe: PointwiseRecipe) -> dict[str, list[Any]]:
    """The tuner's GPU knobs (defaults first): elements per program, warps per program."""
    return {"block": [1024, 2048, 4096, 512], "num_warps": [4, 8, 2]}


def _kernel(recipe: PointwiseRecipe) -> str:
    n = len(recipe.params)
    sig = "".join(f", P{j}, B{j}, F{j}: tl.constexpr" for j in range(n))
    loads = "".join(
        f"    idx{j} = tl.load(B{j} + o, mask=mask, other=0)\n"
        f"    if F{j}:\n"
        f"        idx{j} = idx{j} + i\n"
        f"    p{j} = tl.load(P{j} + idx{j}, mask=mask, other=0.0)\n"
        for j in range(n)
    )
    gather = "    o = offs // inner\n    i = offs % inner\n" if n else ""
    body = "".join(f"    {line}\n" for line in recipe.triton_body)
    return f"""@triton.jit
def _pointwise_kernel(x_ptr, y_ptr{sig}, n, inner, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
{gather}{loads}{body}    tl.store(y_ptr + offs, {recipe.result}, mask=mask)
"""


def render_triton(recipe: PointwiseRecipe, config: dict[str, Any] | None = None) -> str:
    cfg = {**TRITON_POINTWISE_DEFAULT, **(config or {})}
    shown = {k: cfg[k] for k in triton_space(recipe)}
    linear = prologue(recipe)
    return f'''"""forge built-in coder: a fused pointwise chain (Triton, one pass over the output).

Tuned config: {shown!r}
"""

import torch
import triton
import triton.language as tl

from forge_reference import Model

PARAMS = {recipe.params!r}
BLOCK = {int(cfg["block"])}
NUM_WARPS = {int(cfg["num_warps"])}
_plans = {{}}
_on_device = {{}}


{_kernel(recipe)}

{ATTR_SOURCE}{PLAN_SOURCE}def _tables(shape, pshapes, device):
    key = (shape, pshapes, str(device))
    if key not in _on_device:
        outer, inner, tables = _plan(shape, pshapes)
        _on_device[key] = (inner, [(b.to(device), bool(f)) for b, f in tables])
    return _on_device[key]


class ModelNew(Model):
    def forward(self, x):
{linear}        n = y.numel()
        if n == 0:
            return y
        params = [_attr(self, name).detach().contiguous() for name in PARAMS]
        inner, tables = _tables(tuple(y.shape), tuple(tuple(p.shape) for p in params), x.device)
        flat = [t for p, (b, f) in zip(params, tables) for t in (p, b, f)]
        _pointwise_kernel[(triton.cdiv(n, BLOCK),)](x, y, *flat, n, inner, BLOCK=BLOCK, num_warps=NUM_WARPS)
        return y
'''
