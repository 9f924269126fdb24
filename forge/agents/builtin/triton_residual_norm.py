"""Triton kernels for the residual-add + norm family (CUDA devices): one program per row.

When the row fits one tile (the usual hidden sizes) the sum stays in registers: both inputs are
read once, h and the norm written once. Longer rows are walked in tiles: h is stored as it is
formed (it is an output, or a scratch buffer when the reference does not return it), then read
back from L2 for the variance and the output.
"""

from __future__ import annotations

from typing import Any

from forge.agents.builtin.py_snippets import ATTR_HELPERS
from forge.agents.builtin.residual_norm import ResidualNormRecipe, returns
from forge.agents.builtin.rowwise import eps_source
from forge.agents.builtin.triton_rowwise import TRITON_ROW_DEFAULT, triton_param_args, triton_space

_KERNEL = """@triton.jit
def _add_norm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, h_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr,
                     ONE_TILE: tl.constexpr, STORE_H: tl.constexpr, LAYERNORM: tl.constexpr,
                     HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_ptr += row * cols
    r_ptr += row * cols
    h_ptr += row * cols
    y_ptr += row * cols
    if ONE_TILE:
        offs = tl.arange(0, BLOCK)
        mask = offs < cols
        v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        v += tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if STORE_H:
            tl.store(h_ptr + offs, v, mask=mask)
        if LAYERNORM:
            mean = tl.sum(v, axis=0) / cols
            d = tl.where(mask, v - mean, 0.0)
            out = d * (1.0 / tl.sqrt(tl.sum(d * d, axis=0) / cols + eps))
        else:
            out = v * (1.0 / tl.sqrt(tl.sum(v * v, axis=0) / cols + eps))
        if HAS_W:
            out = out * tl.load(w_ptr + offs, mask=mask, other=0.0)
        if HAS_B:
            out = out + tl.load(b_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + offs, out, mask=mask)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, cols, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < cols
            v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            v += tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(h_ptr + offs, v, mask=mask)
            if LAYERNORM:
                acc += v
            else:
                acc += v * v
        tl.debug_barrier()  # this program's stores of h are visible to all of its threads
        if LAYERNORM:
            mean = tl.sum(acc, axis=0) / cols
            acc = tl.zeros([BLOCK], tl.float32)
            for start in range(0, cols, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                mask = offs < cols
                d = tl.where(mask, tl.load(h_ptr + offs, mask=mask, other=0.0) - mean, 0.0)
                acc += d * d
            rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
        else:
            mean = 0.0
            rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
        for start in range(0, cols, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < cols
            out = (tl.load(h_ptr + offs, mask=mask, other=0.0) - mean) * rstd
            if HAS_W:
                out = out * tl.load(w_ptr + offs, mask=mask, other=0.0)
            if HAS_B:
                out = out + tl.load(b_ptr + offs, mask=mask, other=0.0)
            tl.store(y_ptr + offs, out, mask=mask)
"""


def render_triton(recipe: ResidualNormRecipe, config: dict[str, Any] | None = None) -> str:
    """The candidate's Python source: the Triton kernel and a ``ModelNew`` that launches it."""
    cfg = {**TRITON_ROW_DEFAULT, **(config or {})}
    shown = {k: cfg[k] for k in triton_space(recipe)}
    norm = recipe.norm
    w, b = triton_param_args(norm)
    return f'''"""forge built-in coder: residual add + {norm.kind} in one pass (Triton, one program per row).

Tuned config: {shown!r}
"""

import torch
import triton
import triton.language as tl

from forge_reference import Model

BLOCK_MAX = {int(cfg["block"])}
NUM_WARPS = {int(cfg["num_warps"])}
WANT_H = {recipe.wants_sum!r}


{_KERNEL}

{ATTR_HELPERS}class ModelNew(Model):
    def forward(self, x, residual):
        x, residual = (t.contiguous() for t in torch.broadcast_tensors(x, residual))
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        block = min(BLOCK_MAX, triton.next_power_of_2(max(cols, 1)))
        one_tile = cols <= block
        # h is an output, or the scratch the tiled path re-reads; one tile keeps it in registers
        h = torch.empty_like(x) if WANT_H or not one_tile else x
        y = torch.empty_like(x)
        if rows:
            _add_norm_kernel[(rows,)](
                x, residual, {w}, {b}, h, y, cols, {eps_source(norm)}, BLOCK=block, ONE_TILE=one_tile,
                STORE_H=WANT_H, LAYERNORM={norm.kind == "layernorm"}, HAS_W={norm.weight is not None},
                HAS_B={norm.bias is not None}, num_warps=NUM_WARPS,
            )
        return {returns(recipe)}
'''
