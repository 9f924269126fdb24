"""Triton kernels for the row-wise family (CUDA devices): one program per row, the row walked in
tiles of BLOCK columns, so any row length works; statistics are kept per lane and reduced once.

Softmax-like ops use the online max/sum recurrence (one pass for the statistics, one to write);
layernorm takes the mean, then the centred variance, then writes (the row is re-read from L2).
Under ``TRITON_INTERPRET=1`` the same source runs on CPU tensors, which is how it is tested
without a GPU.
"""

from __future__ import annotations

from typing import Any

from forge.agents.builtin.py_snippets import ATTR_HELPERS
from forge.agents.builtin.rowwise import RowRecipe, eps_source

TRITON_ROW_DEFAULT: dict[str, Any] = {"block": 4096, "num_warps": 8}

_ONLINE_STATS = """
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(xr + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, v)
        # lanes that have only seen -inf keep s = 0 (exp(-inf - -inf) would be NaN)
        scale = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        s = s * scale + tl.where(m_new == float("-inf"), 0.0, tl.exp(v - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
"""

_ROW_SUM = """
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(xr + offs, mask=offs < cols, other=0.0).to(tl.float32)
    row_sum = tl.sum(acc, axis=0)
"""

_BODIES = {
    "softmax": _ONLINE_STATS
    + """
    inv = 1.0 / row_sum
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        v = tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(yr + offs, tl.exp(v - row_max) * inv, mask=mask)
""",
    "log_softmax": _ONLINE_STATS
    + """
    log_sum = tl.log(row_sum)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        v = tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(yr + offs, (v - row_max) - log_sum, mask=mask)  # max + log_sum would round at |max|
""",
    "logsumexp": _ONLINE_STATS
    + """
    # +inf decides the result alone (its lane's sum is exp(inf - inf) = NaN), unless a NaN is present
    nans = tl.zeros([BLOCK], tl.int32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(xr + offs, mask=offs < cols, other=0.0)
        nans += (v != v).to(tl.int32)
    lse = tl.where(row_max == float("inf"), row_max, row_max + tl.log(row_sum))
    tl.store(y_ptr + row, tl.where(tl.sum(nans, axis=0) > 0, float("nan"), lse))
""",
    "sum": _ROW_SUM
    + """
    tl.store(y_ptr + row, row_sum)
""",
    "mean": _ROW_SUM
    + """
    tl.store(y_ptr + row, row_sum / cols)
""",
    "amax": """
    acc = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(xr + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        acc = tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL)
    has_nan = tl.sum((acc != acc).to(tl.int32), axis=0) > 0  # torch.amax propagates NaN
    tl.store(y_ptr + row, tl.where(has_nan, float("nan"), tl.max(acc, axis=0)))
""",
    "layernorm": _ROW_SUM
    + """
    mean = row_sum / cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        d = tl.where(mask, tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        v = (tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32) - mean) * rstd
        if HAS_W:
            v = v * tl.load(w_ptr + offs, mask=mask, other=0.0)
        if HAS_B:
            v = v + tl.load(b_ptr + offs, mask=mask, other=0.0)
        tl.store(yr + offs, v, mask=mask)
""",
    "rmsnorm": """
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(xr + offs, mask=offs < cols, other=0.0).to(tl.float32)
        acc += v * v
    inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        v = tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32) * inv
        if HAS_W:
            v = v * tl.load(w_ptr + offs, mask=mask, other=0.0)
        tl.store(yr + offs, v, mask=mask)
""",
}
_REDUCING = ("sum", "mean", "amax", "logsumexp")


def triton_space(recipe: Any) -> dict[str, list[Any]]:
    """The tuner's GPU knobs for one-program-per-row kernels (this family and residual add + norm;
    defaults first): columns per tile, warps per row program."""
    return {"block": [4096, 1024, 2048, 8192], "num_warps": [8, 4, 16]}


def triton_param_args(recipe: RowRecipe) -> tuple[str, str]:
    """The weight and bias launch arguments: the module's parameters, or ``x`` as a placeholder
    pointer the kernel never reads (HAS_W/HAS_B are False then)."""
    w = f"_param(self, {recipe.weight!r})" if recipe.weight else "x"
    b = f"_param(self, {recipe.bias!r})" if recipe.bias else "x"
    return w, b


def render_triton(recipe: RowRecipe, config: dict[str, Any] | None = None) -> str:
    """The candidate's Python source: a Triton kernel and a ``ModelNew`` that launches it."""
    cfg = {**TRITON_ROW_DEFAULT, **(config or {})}
    shown = {k: cfg[k] for k in triton_space(recipe)}
    out_shape = "x.shape[:-1] + ((1,) if KEEPDIM else ())" if recipe.kind in _REDUCING else "x.shape"
    w, b = triton_param_args(recipe)
    eps = eps_source(recipe)
    return f'''"""forge built-in coder: {recipe.kind} over the last dimension (Triton, one program per row).

Tuned config: {shown!r}
"""

import torch
import triton
import triton.language as tl

from forge_reference import Model

KEEPDIM = {recipe.keepdim!r}
BLOCK_MAX = {int(cfg["block"])}
NUM_WARPS = {int(cfg["num_warps"])}


@triton.jit
def _row_kernel(x_ptr, y_ptr, w_ptr, b_ptr, cols, eps, BLOCK: tl.constexpr, HAS_W: tl.constexpr,
                HAS_B: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * cols
    yr = y_ptr + row * cols
{_BODIES[recipe.kind]}

{ATTR_HELPERS}class ModelNew(Model):
    def forward(self, x):
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        y = torch.empty({out_shape}, dtype=x.dtype, device=x.device)
        if rows == 0:
            return y
        block = min(BLOCK_MAX, triton.next_power_of_2(cols))
        _row_kernel[(rows,)](
            x, y, {w}, {b}, cols, {eps}, BLOCK=block, HAS_W={recipe.weight is not None},
            HAS_B={recipe.bias is not None}, num_warps=NUM_WARPS,
        )
        return y
'''
