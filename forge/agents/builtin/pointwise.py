"""The built-in coder's pointwise family: a chain of elementwise ops on one input with broadcast
parameters (optionally after an ``nn.Linear``, done by the library matmul), fused into one C++ pass.

Each fx node becomes one C++ statement on floats. Parameters are read through per-outer-block base
offsets computed once per shape on the Python side, so any broadcast in which every parameter is
either constant or contiguous over the innermost block runs as a plain SIMD loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from forge.agents.builtin.cpp_snippets import HEADER, WRITE
from forge.agents.builtin.ops import ERF, CppMath, cpp_math_of, cpp_math_source
from forge.agents.builtin.pointwise_expr import CPP, TRITON, chained_op, expression
from forge.agents.builtin.py_snippets import ATTR_SOURCE, PLAN_SOURCE
from forge.agents.builtin.rowwise import fetch_attr
from forge.agents.builtin.tuner import effective_config


@dataclass(frozen=True)
class PointwiseRecipe:
    body: tuple[str, ...]  # C++ statements computing t<k> from v (input) and p<j> (parameters)
    result: str  # the variable holding the output value
    params: tuple[str, ...]  # attribute paths of the parameters, in p<j> order
    linear: str | None = None  # attribute path of an nn.Linear applied to the input first
    triton_body: tuple[str, ...] = ()  # the same statements in Triton
    outer: int = 1  # outer blocks of the analysed shape (the kernel's chunk knob acts below SPLIT_BELOW)
    ops: frozenset[str] = frozenset()  # the table's ops its statements are written with (``ops.OPS``)

    @property
    def cpp_math(self) -> frozenset[CppMath]:
        """The vectorisable functions its C++ statements call (its kernel defines them)."""
        return cpp_math_of(self.ops)


def analyze(model: torch.nn.Module, inputs: list[torch.Tensor]) -> PointwiseRecipe | str:
    if len(inputs) != 1 or inputs[0].dtype != torch.float32:
        return "the pointwise kernels take exactly one float32 input"
    try:
        gm = fx.symbolic_trace(model)
    except Exception as exc:
        return f"torch.fx could not trace the reference ({type(exc).__name__}: {exc})"
    env: dict[fx.Node, str] = {}
    params: list[str] = []
    pshapes: list[tuple[int, ...]] = []
    body: list[str] = []
    tbody: list[str] = []
    ops: set[str] = set()
    linear = None
    out_shape = tuple(inputs[0].shape)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = "v"
        elif node.op == "get_attr":
            value = fetch_attr(gm, str(node.target))
            if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
                return f"attribute {node.target} is not a float32 tensor"
            try:
                if torch.broadcast_shapes(tuple(value.shape), out_shape) != out_shape:
                    return f"parameter {node.target} would change the output shape"
            except RuntimeError:
                return f"parameter {node.target} does not broadcast to the input"
            env[node] = f"p{len(params)}"
            params.append(str(node.target))
            pshapes.append(tuple(value.shape))
        elif node.op == "call_module":
            sub = gm.get_submodule(str(node.target))
            if not (isinstance(sub, torch.nn.Linear) and linear is None and env.get(node.args[0]) == "v" and not body):
                return f"module {type(sub).__name__} is not supported in a pointwise chain"
            arg = node.args[0]
            if not isinstance(arg, fx.Node) or len(arg.users) != 1:  # past here "v" is the Linear's output
                return "the input is used besides the nn.Linear (e.g. a residual): not a plain epilogue"
            linear = str(node.target)
            out_shape = (*out_shape[:-1], sub.out_features)
            env[node] = "v"
        elif node.op in ("call_function", "call_method"):
            expr, texpr = expression(node, env, CPP), expression(node, env, TRITON)
            if expr is None or texpr is None:
                return f"op {node.target} is not one the built-in pointwise coder handles"
            name = f"t{len(body)}"
            ops.add(str(chained_op(node)))
            body.append(CPP.statement.format(name=name, expr=expr))
            tbody.append(TRITON.statement.format(name=name, expr=texpr))
            env[node] = name
        elif node.op == "output":
            result = node.args[0]
            if not isinstance(result, fx.Node) or result not in env:
                return "the reference must return a single tensor"
            if not body:
                return "the reference does no elementwise work"
            lin = gm.get_submodule(linear) if linear is not None else None
            shape = (*out_shape[:-1], lin.out_features) if isinstance(lin, torch.nn.Linear) else out_shape
            outer = plan_of_shapes()(shape, tuple(pshapes))[0]
            return PointwiseRecipe(tuple(body), env[result], tuple(params), linear, tuple(tbody), outer, frozenset(ops))
    return "no output"


_MAX_SPECIALISED = 4  # parameters whose constant/contiguous layout is a template argument
SPLIT_BELOW = 64  # with fewer outer blocks than this, the kernel splits each into chunks


def plan_of_shapes() -> Any:
    """The candidate's own ``_plan`` (PLAN_SOURCE), so analysis splits shapes exactly as it does."""
    namespace: dict[str, Any] = {"torch": torch, "_plans": {}}
    exec(PLAN_SOURCE, namespace)
    return namespace["_plan"]


# The tuner's knobs (defaults first): streamed stores, the chunk that splits long inner runs
# across threads, the thread count (0: all), and for an exact GELU how erf is computed.
POINTWISE_DEFAULT: dict[str, Any] = {"stream": False, "chunk": 4096, "threads": 0, "erf": "torch"}


def uses_erf(recipe: PointwiseRecipe) -> bool:
    return CppMath.ERF in recipe.cpp_math


def space(recipe: PointwiseRecipe) -> dict[str, list[Any]]:
    knobs: dict[str, list[Any]] = {"stream": [False, True], "chunk": [4096, 16384, 65536], "threads": [0, 1]}
    if recipe.linear:  # the epilogue runs in place on the matmul's fresh (cache-warm) output
        knobs.pop("stream")
    if uses_erf(recipe):  # an exact GELU: its erf dominates the cost of the pass
        knobs["erf"] = list(ERF)
    return knobs


def canonical(recipe: PointwiseRecipe, config: dict[str, Any]) -> dict[str, Any]:
    """With many outer blocks (at the analysed shape) the kernel never splits them: chunk is inert."""
    if recipe.outer >= SPLIT_BELOW and "chunk" in config:
        return {**config, "chunk": POINTWISE_DEFAULT["chunk"]}
    return config


def _cpp(recipe: PointwiseRecipe, cfg: dict[str, Any]) -> str:
    """The kernel: a template over each parameter's layout (constant or contiguous over the inner
    run) so every variant is a plain SIMD loop, and a dispatcher choosing the variant at run time."""
    n = len(recipe.params)
    spec = min(n, _MAX_SPECIALISED)
    tparams = ", ".join(f"bool F{j}" for j in range(spec))
    c_params = "".join(f", const float* P{j}, const int64_t* B{j}, int64_t f{j}" for j in range(n))
    call_args = "".join(f", P{j}, B{j}, f{j}" for j in range(n))
    loads = "".join(
        f"            const float p{j} = F{j} ? q{j}[i] : q{j}[0];\n"
        if j < spec
        else f"            const float p{j} = q{j}[f{j} ? i : 0];\n"
        for j in range(n)
    )
    bases = "".join(f"        const float* q{j} = P{j} + B{j}[o];\n" for j in range(n))
    body = "".join(f"            {line}\n" for line in recipe.body)
    template = f"template <{tparams}>\n" if spec else ""
    chunk = int(cfg["chunk"])
    threads = f" num_threads({int(cfg['threads'])})" if cfg["threads"] else ""
    stream = "true" if cfg["stream"] else "false"
    fence = "    forge_fence();\n" if cfg["stream"] else ""
    cases = []
    for mask in range(2**spec):
        flags = ", ".join("true" if mask >> j & 1 else "false" for j in range(spec))
        cond = " && ".join(f"(f{j} != 0) == {'true' if mask >> j & 1 else 'false'}" for j in range(spec)) or "true"
        call = f"run<{flags}>" if spec else "run"
        cases.append(f"    if ({cond}) {{ {call}(x, y{call_args}, outer, inner); return; }}\n")
    return (
        HEADER
        + WRITE
        + cpp_math_source(recipe.cpp_math, str(cfg["erf"]))
        + f"""
{template}static void run(const float* x, float* y{c_params}, int64_t outer, int64_t inner) {{
    // Few outer blocks: split each into chunks so every thread has work.
    const int64_t nch = outer >= {SPLIT_BELOW} ? 1 : (inner + {chunk - 1}) / {chunk};
    const int64_t ch = nch > 0 ? (inner + nch - 1) / nch : 0;
    #pragma omp parallel for schedule(static){threads}
    for (int64_t task = 0; task < outer * nch; ++task) {{
        const int64_t o = task / nch;
        const int64_t i0 = (task % nch) * ch;
        const int64_t i1 = i0 + ch < inner ? i0 + ch : inner;
        const float* xo = x + o * inner;
        float* yo = y + o * inner;
{bases}        forge_write(yo + i0, i1 - i0, {stream}, [&](int64_t k) {{
            const int64_t i = i0 + k;
            const float v = xo[i];
{loads}{body}            return {recipe.result};
        }});
    }}
{fence}}}

extern "C" void kernel(const float* x, float* y{c_params}, int64_t outer, int64_t inner) {{
{"".join(cases)}}}
"""
    )


def prologue(recipe: PointwiseRecipe) -> str:
    """``forward``'s first lines: the library matmul (the epilogue then runs in place on its fresh
    output), or a contiguous input and a new output."""
    if recipe.linear:
        return (
            f"        lin = _attr(self, {recipe.linear!r})\n"
            "        x2 = x.reshape(-1, x.shape[-1])\n"
            "        w = lin.weight.t()\n"
            "        x2 = torch.mm(x2, w) if lin.bias is None else torch.addmm(lin.bias, x2, w)\n"
            "        x = x2.reshape(*x.shape[:-1], -1)\n"
            "        y = x  # a fresh matmul output: the epilogue runs in place\n"
        )
    return "        x = x.contiguous()\n        y = torch.empty_like(x)\n"


def render(recipe: PointwiseRecipe, config: dict[str, Any] | None = None) -> str:
    cfg = canonical(recipe, {**POINTWISE_DEFAULT, **(config or {})})  # inert knobs leave no trace
    cpp = _cpp(recipe, cfg)
    knobs = space(recipe)  # the docstring lists the knobs that shape this kernel
    shown = effective_config(knobs, {k: cfg[k] for k in knobs}, lambda c: canonical(recipe, c))
    linear = prologue(recipe)
    return f'''"""forge built-in coder: a fused pointwise chain (C++, one pass, OpenMP + SIMD).

Tuned config: {shown!r}
"""

import torch

from forge import cpp
from forge_reference import Model

PARAMS = {recipe.params!r}
_lib = cpp.load(r"""{cpp}""")
_plans = {{}}


{ATTR_SOURCE}{PLAN_SOURCE}class ModelNew(Model):
    def forward(self, x):
{linear}        params = [_attr(self, name).detach().contiguous() for name in PARAMS]
        outer, inner, tables = _plan(tuple(y.shape), tuple(tuple(p.shape) for p in params))
        flat = [t for p, (b, f) in zip(params, tables) for t in (p, b, f)]
        _lib.kernel(x, y, *flat, outer, inner)
        return y
'''
