"""Triton kernels for the pointwise family (CUDA devices): the whole elementwise chain in one pass
over the output, parameters gathered through the same outer/inner plan as the C++ kernels (each
parameter constant or contiguous over the inner run; which one is a compile-time flag).

An ``nn.Linear`` in front becomes a tiled Triton matmul (grouped tile order for L2 reuse) whose
epilogue adds the bias and runs the chain on the accumulator before the only store, so the matmul
output never makes a round trip through memory. ``tl.dot`` on float32 would default to TF32 (10-bit
mantissa) and fail the float32 tolerance; the kernel asks for IEEE float32 or for 3xTF32, which
keeps float32 accuracy on tensor cores. The tuner can also pick the library matmul (cuBLAS) with
the chain run in place on its fresh output, as on CPU.
"""

from __future__ import annotations

from typing import Any

from forge.agents.builtin.pointwise import PointwiseRecipe, prologue
from forge.agents.builtin.py_snippets import ATTR_SOURCE, PLAN_SOURCE
from forge.agents.builtin.tuner import default_config, effective_config

TRITON_POINTWISE_DEFAULT: dict[str, Any] = {"block": 1024, "num_warps": 4}


def triton_space(recipe: PointwiseRecipe) -> dict[str, list[Any]]:
    """The tuner's GPU knobs (defaults first). A pointwise chain: elements and warps per program.
    After an ``nn.Linear``: Triton or library matmul, the matmul tile (BLOCK_M x BLOCK_N x BLOCK_K),
    dot precision, warps and software-pipeline stages.

    3xTF32 first: on an H100 (256x1024x1024) it ran 2.6x faster than the IEEE dot (CUDA-core FMAs)
    at float32 accuracy; smaller tiles first, as the large ones spilled there with few warps."""
    if recipe.linear:
        return {
            "matmul": ["triton", "library"],
            "tile": ["64x64x32", "32x64x32", "64x128x32", "128x64x32", "128x128x32"],
            "precision": ["tf32x3", "ieee"],
            "num_warps": [4, 8, 2],
            "num_stages": [3, 4, 2],
        }
    return {"block": [1024, 2048, 4096, 512], "num_warps": [4, 8, 2]}


def triton_canonical(recipe: PointwiseRecipe, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the knobs that do not change the kernel at their defaults: with the library
    doing the matmul, the Triton matmul's tile, dot precision and stages (its warps still launch
    the epilogue kernel)."""
    if recipe.linear and config.get("matmul") == "library":
        defaults = default_config(triton_space(recipe))
        return {**config, **{k: defaults[k] for k in ("tile", "precision", "num_stages") if k in config}}
    return config


def _gathers(recipe: PointwiseRecipe) -> str:
    """Each parameter's value at output offsets ``offs``: its per-outer-block base (``B<j>``) plus,
    when it is full over the inner run, the position within it."""
    n = len(recipe.params)
    loads = "".join(
        f"    idx{j} = tl.load(B{j} + o, mask=mask, other=0)\n"
        f"    if F{j}:\n"
        f"        idx{j} = idx{j} + i\n"
        f"    p{j} = tl.load(P{j} + idx{j}, mask=mask, other=0.0)\n"
        for j in range(n)
    )
    gather = "    o = offs // inner\n    i = offs % inner\n" if n else ""
    body = "".join(f"    {line}\n" for line in recipe.triton_body)
    return gather + loads + body


def _signature(recipe: PointwiseRecipe) -> str:
    return "".join(f", P{j}, B{j}, F{j}: tl.constexpr" for j in range(len(recipe.params)))


def _kernel(recipe: PointwiseRecipe) -> str:
    return f"""@triton.jit
def _pointwise_kernel(x_ptr, y_ptr{_signature(recipe)}, n, inner, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
{_gathers(recipe)}    tl.store(y_ptr + offs, {recipe.result}, mask=mask)
"""


def _linear_kernel(recipe: PointwiseRecipe) -> str:
    """y[m, n] = chain(sum_k x[m, k] * w[n, k] + bias[n]); x is M x K, w (nn.Linear's) N x K."""
    return f"""@triton.jit
def _linear_kernel(x_ptr, w_ptr, bias_ptr, y_ptr{_signature(recipe)}, M, N, K, inner,
                   HAS_BIAS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    # Grouped order: GROUP_M row tiles share each column tile of w while it is in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    x_rows = x_ptr + rm[:, None].to(tl.int64) * K
    w_cols = w_ptr + rn[None, :].to(tl.int64) * K
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(x_rows + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(w_cols + kk[:, None], mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None].to(tl.int64) * N + rn[None, :]
    v = acc
{_gathers(recipe)}    tl.store(y_ptr + offs, {recipe.result}, mask=mask)
"""


_TABLES = """def _tables(shape, pshapes, device):
    key = (shape, pshapes, str(device))
    if key not in _on_device:
        outer, inner, tables = _plan(shape, pshapes)
        _on_device[key] = (inner, [(b.to(device), bool(f)) for b, f in tables])
    return _on_device[key]


"""
_PARAMS = """        params = [_attr(self, name).detach().contiguous() for name in PARAMS]
        inner, tables = _tables(tuple(y.shape), tuple(tuple(p.shape) for p in params), x.device)
        flat = [t for p, (b, f) in zip(params, tables) for t in (p, b, f)]
"""


def _pointwise_forward(recipe: PointwiseRecipe) -> str:
    return f"""class ModelNew(Model):
    def forward(self, x):
{prologue(recipe)}        n = y.numel()
        if n == 0:
            return y
{_PARAMS}        _pointwise_kernel[(triton.cdiv(n, BLOCK),)](x, y, *flat, n, inner, BLOCK=BLOCK, num_warps=NUM_WARPS)
        return y
"""


def _linear_forward(recipe: PointwiseRecipe) -> str:
    return f"""class ModelNew(Model):
    def forward(self, x):
        lin = _attr(self, {recipe.linear!r})
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        w = lin.weight.detach().contiguous()
        m, k = x2.shape
        n_out = w.shape[0]
        y = torch.empty((*x.shape[:-1], n_out), dtype=x.dtype, device=x.device)
        if y.numel() == 0:
            return y
{_PARAMS}        bias = w if lin.bias is None else lin.bias.detach().contiguous()
        grid = (triton.cdiv(m, BM) * triton.cdiv(n_out, BN),)
        _linear_kernel[grid](
            x2, w, bias, y, *flat, m, n_out, k, inner, HAS_BIAS=lin.bias is not None, BM=BM, BN=BN, BK=BK,
            GROUP_M=8, PRECISION=PRECISION, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
        )
        return y
"""


def render_triton(recipe: PointwiseRecipe, config: dict[str, Any] | None = None) -> str:
    """The candidate's Python source: the Triton kernel and a ``ModelNew`` that launches it."""
    # block stays at its default on the library-matmul path, whose knobs do not include it
    cfg = {**TRITON_POINTWISE_DEFAULT, **default_config(triton_space(recipe)), **(config or {})}
    knobs = triton_space(recipe)  # the docstring lists the knobs that shape this kernel
    shown = effective_config(knobs, {k: cfg[k] for k in knobs}, lambda c: triton_canonical(recipe, c))
    fused_matmul = bool(recipe.linear) and cfg["matmul"] == "triton"
    if fused_matmul:
        bm, bn, bk = (int(d) for d in str(cfg["tile"]).split("x"))
        what = "a tiled matmul with the bias and pointwise chain fused into its epilogue"
        consts = (
            f"BM, BN, BK = {bm}, {bn}, {bk}\nPRECISION = {str(cfg['precision'])!r}\n"
            f"NUM_STAGES = {int(cfg['num_stages'])}\n"
        )
        kernel, forward = _linear_kernel(recipe), _linear_forward(recipe)
    else:
        what = "a fused pointwise chain" + (" after the library matmul" if recipe.linear else "")
        consts = f"BLOCK = {int(cfg['block'])}\n"
        kernel, forward = _kernel(recipe), _pointwise_forward(recipe)
    return f'''"""forge built-in coder: {what} (Triton).

Tuned config: {shown!r}
"""

import torch
import triton
import triton.language as tl

from forge_reference import Model

PARAMS = {recipe.params!r}
{consts}NUM_WARPS = {int(cfg["num_warps"])}
_plans = {{}}
_on_device = {{}}


{kernel}

{ATTR_SOURCE}{PLAN_SOURCE}{_TABLES}{forward}'''
