"""The built-in coder's row-wise family: softmax, log-softmax, layernorm, rmsnorm, sum/mean/amax
over the last dimension, recognised from a torch.fx trace of the reference and emitted as C++
(OpenMP across rows, SIMD within a row) that subclasses the reference ``Model``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from forge.agents.builtin.cpp_snippets import HEADER, REDUCE, ROW_DEFAULT, WRITE, rowwise_cpp
from forge.agents.builtin.ops import CppMath, cpp_math_source
from forge.agents.builtin.py_snippets import ATTR_HELPERS
from forge.agents.builtin.tuner import effective_config


@dataclass(frozen=True)
class RowRecipe:
    kind: str  # one of cpp_snippets.ROW_KINDS
    weight: str | None = None  # attribute path of the weight parameter on the module
    bias: str | None = None
    eps: float | str | None = None  # a constant, or an attribute path (e.g. "norm.eps")
    keepdim: bool = False


def _is_last_dim(dim: Any, ndim: int) -> bool:
    return isinstance(dim, int) and dim in (-1, ndim - 1)


def graph_calls(graph: fx.Graph) -> list[fx.Node]:
    return [n for n in graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def call_name(node: fx.Node) -> str:
    t = node.target
    if node.op == "call_method":
        return str(t)
    if node.op == "call_module":
        return "module"
    if t is operator.add:
        return "add"
    if t is operator.mul:
        return "mul"
    return str(getattr(t, "__name__", t))


def _float_attr(model: torch.nn.Module, value: float) -> str | None:
    """The attribute holding a constant fx inlined (e.g. ``self.eps``), so the kernel reads the
    instance's own value rather than the one seen at trace time."""
    for prefix, module in model.named_modules():
        for key, v in vars(module).items():
            if isinstance(v, float) and not key.startswith("_") and v == value:
                return f"{prefix}.{key}" if prefix else key
    return None


def match_norm(
    gm: fx.GraphModule, model: torch.nn.Module, calls: list[fx.Node], ndim: int, cols: int
) -> RowRecipe | None:
    """A layernorm/rmsnorm over the last dimension when ``calls`` are exactly its nodes: an
    ``nn.LayerNorm`` or ``nn.RMSNorm`` module, or RMSNorm written out (pow, mean, add eps, rsqrt,
    two muls, the second by a weight)."""
    names = [call_name(n) for n in calls]
    if names == ["module"]:
        target = str(calls[0].target)
        sub = gm.get_submodule(target)
        if isinstance(sub, torch.nn.LayerNorm) and tuple(sub.normalized_shape) == (cols,):
            return RowRecipe(
                "layernorm",
                weight=f"{target}.weight" if sub.weight is not None else None,
                bias=f"{target}.bias" if sub.bias is not None else None,
                eps=f"{target}.eps",
            )
        if isinstance(sub, torch.nn.RMSNorm) and tuple(sub.normalized_shape) == (cols,):
            # eps=None means the dtype's machine epsilon (float32 here), as torch does
            eps = f"{target}.eps" if sub.eps is not None else float(torch.finfo(torch.float32).eps)
            return RowRecipe("rmsnorm", weight=f"{target}.weight" if sub.weight is not None else None, eps=eps)
    if names == ["pow", "mean", "add", "rsqrt", "mul", "mul"]:
        pow_, mean, add, rsqrt, mul, mul_w = calls
        weight = [a for a in mul_w.args if isinstance(a, fx.Node) and a.op == "get_attr"]
        w = fetch_attr(gm, str(weight[0].target)) if len(weight) == 1 else None
        if (
            pow_.args[1:] == (2,)
            and mean.args[:1] == (pow_,)
            and _is_last_dim(mean.kwargs.get("dim", mean.args[1] if len(mean.args) > 1 else None), ndim)
            and mean.kwargs.get("keepdim", False)
            and add.args[:1] == (mean,)
            and isinstance(add.args[1], float)
            and rsqrt.args[:1] == (add,)
            and set(mul.args) == {pow_.args[0], rsqrt}  # x * rms, of the very x that was squared
            and len(mul_w.args) == 2
            and set(mul_w.args) == {mul, weight[0]}
            # the kernel reads one weight per column
            and isinstance(w, torch.Tensor)
            and w.dtype == torch.float32
            and tuple(w.shape) == (cols,)
        ):
            eps = float(add.args[1])
            return RowRecipe("rmsnorm", weight=str(weight[0].target), eps=_float_attr(model, eps) or eps)
    return None


def fetch_attr(obj: object, path: str) -> object:
    """The attribute at a dotted path (a traced get_attr target), or None where it is missing."""
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def analyze(model: torch.nn.Module, inputs: list[torch.Tensor]) -> RowRecipe | str:
    """A recipe, or the reason this op is not in the row-wise family."""
    if len(inputs) != 1 or inputs[0].dtype != torch.float32:
        return "the row-wise kernels take exactly one float32 input"
    ndim = inputs[0].dim()
    try:
        gm = fx.symbolic_trace(model)
    except Exception as exc:
        return f"torch.fx could not trace the reference ({type(exc).__name__}: {exc})"
    calls = graph_calls(gm.graph)
    names = [call_name(n) for n in calls]
    if len(calls) == 1:
        node = calls[0]
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
        if names[0] in ("softmax", "log_softmax") and _is_last_dim(dim, ndim):
            return RowRecipe(names[0])
        if names[0] in ("sum", "mean", "amax", "logsumexp") and _is_last_dim(dim, ndim):
            keepdim = bool(node.kwargs.get("keepdim", node.args[2] if len(node.args) > 2 else False))
            return RowRecipe(names[0], keepdim=keepdim)
    norm = match_norm(gm, model, calls, ndim, inputs[0].shape[-1] if ndim else 1)
    if norm is not None:
        return norm
    return f"not a row-wise op the built-in coder knows (traced ops: {', '.join(names) or 'none'})"


def space(recipe: RowRecipe) -> dict[str, list[Any]]:
    """The tuner's knobs for this recipe, each with its values (the default first)."""
    knobs: dict[str, list[Any]] = {}
    if recipe.kind in ("sum", "mean", "layernorm", "rmsnorm"):
        knobs["acc"] = ["double", "float"]
    if recipe.kind not in ("sum", "mean", "amax", "logsumexp"):
        knobs["stream"] = [False, True]
    if recipe.kind == "softmax":
        knobs["softmax"] = ["store", "recompute"]
    if recipe.kind == "layernorm":
        knobs["moments"] = ["two_pass", "one_pass"]
    if recipe.kind in ("sum", "mean", "amax"):  # rows reduced side by side: more fetches in flight
        knobs["interleave"] = [4, 1, 2, 8]
    if recipe.kind not in ("sum", "mean", "amax"):  # a pass that reads the row from cache, to overlap
        knobs["prefetch"] = [True, False]  # with the next row's fetch (a one-pass reduction has none)
    knobs["threads"] = [0, 1]
    return knobs


def canonical(recipe: RowRecipe, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the knobs that do not change this recipe's kernel at their defaults: the
    one-pass layernorm accumulates its moments in double whatever ``acc`` says."""
    if recipe.kind == "layernorm" and config.get("moments") == "one_pass" and "acc" in config:
        return {**config, "acc": space(recipe)["acc"][0]}
    return config


def norm_param_args(recipe: RowRecipe) -> list[str]:
    """The weight (norms) and bias (layernorm) arguments of a C++ norm kernel: each a parameter
    read from the module at call time, or None (a null pointer) when the module has none."""
    args = []
    if recipe.kind in ("layernorm", "rmsnorm"):
        args.append(f"_param(self, {recipe.weight!r})" if recipe.weight else "None")
    if recipe.kind == "layernorm":
        args.append(f"_param(self, {recipe.bias!r})" if recipe.bias else "None")
    return args


def eps_source(recipe: RowRecipe) -> str:
    """The kernel's eps argument: read from the instance at call time, or the traced constant."""
    eps = recipe.eps
    if eps is None:
        return "0.0"
    return f"float(_attr(self, {eps!r}))" if isinstance(eps, str) else repr(float(eps))


def render(recipe: RowRecipe, config: dict[str, Any] | None = None) -> str:
    """The candidate's Python source under ``config`` (knobs from ``space``; defaults otherwise)."""
    cfg = canonical(recipe, {**ROW_DEFAULT, **(config or {})})  # inert knobs leave no trace
    cpp = HEADER + WRITE + REDUCE + cpp_math_source({CppMath.EXP}) + rowwise_cpp(recipe.kind, cfg)
    knobs = space(recipe)  # the docstring lists the knobs that shape this kernel
    shown = effective_config(knobs, {k: cfg[k] for k in knobs}, lambda c: canonical(recipe, c))
    reduce = recipe.kind in ("sum", "mean", "amax", "logsumexp")
    out_shape = "x.shape[:-1] + ((1,) if KEEPDIM else ())" if reduce else "x.shape"
    args = ["x", *norm_param_args(recipe), "y", "rows", "cols"]
    if recipe.eps is not None:
        args.append(eps_source(recipe))
    return f'''"""forge built-in coder: {recipe.kind} over the last dimension (C++, OpenMP rows, SIMD columns).

Tuned config: {shown!r}
"""

import torch

from forge import cpp
from forge_reference import Model

KEEPDIM = {recipe.keepdim!r}
_lib = cpp.load(r"""{cpp}""")


{ATTR_HELPERS}class ModelNew(Model):
    def forward(self, x):
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        y = torch.empty({out_shape}, dtype=x.dtype, device=x.device)
        _lib.kernel({", ".join(args)})
        return y
'''
