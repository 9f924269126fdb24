"""A reference traced to a small set of nodes: what the general lowering (issue #18) starts from.

``make_fx`` runs the model on fake tensors (no real compute) with torch's decomposition table, so
composite ops (softmax, layer/group/batch norm, GELU, losses) break down into primitives: pointwise
``prims`` ops with broadcasting (``broadcast_in_dim``), reductions over any axes (``prims.sum``,
``amax``, ``amin``, ``prod``), views and dtype conversions. Some ops are kept whole because their
decomposition is worse than a kernel of their own:

- scans (``cumsum``, ``cumprod``, ``logcumsumexp``): the table turns them into an O(n^2) masked sum;
- windowed reductions (pooling): the table turns them into ``as_strided`` and gathers;
- arg-reductions (``argmax``/``argmin``, ``max.dim``/``min.dim``): one pass with the index;
- library producers (``mm``, ``bmm``, ``addmm``, ``convolution``, SDPA, and the backwards of the
  last two): a BLAS or oneDNN call whose output the fused epilogue reads.

Parameters and buffers become graph inputs (``torch.func.functional_call``), so the graph is a
pure function of (params, buffers, inputs); a buffer a training-mode reference updates shows up as
a ``copy_`` into it, which the lowering must carry out too (state is output).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import torch
from torch import fx, nn
from torch._decomp import decomposition_table
from torch.func import functional_call
from torch.fx.experimental.proxy_tensor import make_fx

from forge.agents.builtin.gelu_specials import gelu_nan_at_pos_inf
from forge.agents.builtin.ops import PRIMITIVES
from forge.core.module_call import call_arguments, output_layout, output_tensors

aten = torch.ops.aten

# Kept whole (see the module docstring): the lowering has a node of its own for each.
KEPT: tuple[Any, ...] = (
    aten.cumsum,
    aten.cumprod,
    aten.logcumsumexp,
    aten.max_pool1d_with_indices,
    aten.max_pool2d_with_indices,
    aten.max_pool3d_with_indices,
    aten.avg_pool1d,
    aten.avg_pool2d,
    aten.avg_pool3d,
    aten.argmax,
    aten.argmin,
    aten.max,
    aten.min,
    aten.mm,
    aten.bmm,
    aten.addmm,
    aten.convolution,
    aten._scaled_dot_product_flash_attention_for_cpu,
    aten.scaled_dot_product_attention,
    # the backwards of library producers, in a training kernel's backward graph (``joint``)
    aten.convolution_backward,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
)

# Random numbers: a reference drawing them (dropout in training mode) is traced in eval mode, as
# the verifier verifies it (its outputs cannot be compared otherwise).
RANDOM = frozenset(
    {
        "aten.bernoulli",
        "aten.bernoulli_",
        "aten.rand",
        "aten.rand_like",
        "aten.randn",
        "aten.randn_like",
        "prims.rand",
        "aten.native_dropout",
        "aten.uniform_",
        "aten.normal_",
        "aten.randint",
    }
)


def is_random(traced: Traced) -> bool:
    return any(packet_name(n) in RANDOM for n in traced.graph.graph.nodes if n.op == "call_function")


# Output sizes that depend on the data: no static kernel can be emitted for them.
DATA_DEPENDENT: tuple[Any, ...] = (aten.nonzero, aten.masked_select, aten._unique2, aten.unique_dim)


# The node set the IR is built from, by kind (packet names, as ``packet_name`` gives them); the
# pointwise nodes are the primitives of the built-in agent's op table (``ops.PRIMITIVES``).
REDUCTIONS = frozenset(f"prims.{n}" for n in ("sum", "amax", "amin", "prod", "var"))
VIEWS = frozenset(
    [
        f"prims.{n}"
        for n in ("broadcast_in_dim", "collapse_view", "split_dim", "squeeze", "view_of", "transpose", "rev", "reshape")
    ]
    + [
        "aten.as_strided",
        "aten.view",
        "aten.permute",
        "aten.expand",
        "aten.select",
        "aten.slice",
        "aten.alias",
        "aten.lift_fresh_copy",
    ]
)
KEPT_NAMES = frozenset(f"aten.{p.__name__}" for p in KEPT)
OTHER = frozenset(
    {
        "aten.gather",
        "aten.index",
        "aten.copy_",
        "aten.empty",
        "getitem",
        "prims.iota",
        "aten.full",
        "prims.full",
        "prims.scalar_tensor",
        "aten.scalar_tensor",
        "prims.cat",
        "aten.cat",
        "aten.scatter",
    }
)


class NodeKind(StrEnum):
    """What a node of the traced graph is to the lowering."""

    POINTWISE = "pointwise"
    REDUCTION = "reduction"
    VIEW = "view"
    KEPT = "kept"  # an op kept whole (a scan, a pooling, a library call)
    OTHER = "other"  # state updates, gathers, tuple items


def kind_of(node: fx.Node) -> NodeKind | None:
    """pointwise, reduction, view, kept or other (state updates, gathers, tuple items); None:
    outside the node set."""
    name = packet_name(node)
    for kind, names in (
        (NodeKind.POINTWISE, PRIMITIVES),
        (NodeKind.REDUCTION, REDUCTIONS),
        (NodeKind.VIEW, VIEWS),
        (NodeKind.KEPT, KEPT_NAMES),
        (NodeKind.OTHER, OTHER),
    ):
        if name in names:
            return kind
    return None


def decompositions(device: str = "cpu") -> dict[Any, Any]:
    """torch's decomposition table without the kept ops, and without ``lift_fresh_copy``: a tensor
    made in ``forward`` from data (``torch.tensor([...])``) stays a graph constant read through it,
    where its decomposition would apply a view to a real tensor inside the fake-tensor trace. GELU
    decomposes to what torch's kernel on ``device`` gives at +inf (``gelu_specials``)."""
    packets = (*KEPT, aten.lift_fresh, aten.lift_fresh_copy)
    kept = {overload for packet in packets for overload in (getattr(packet, o) for o in packet.overloads())}
    table = {op: fn for op, fn in decomposition_table.items() if op not in kept}
    formula = table.get(aten.gelu.default)
    # Asked now, outside the trace (inside it the probe would be traced, not run).
    nan_at_inf = {approximate: gelu_nan_at_pos_inf(device, approximate) for approximate in ("none", "tanh")}
    if formula is not None:

        def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
            out = formula(x, approximate=approximate)
            if nan_at_inf.get(approximate):
                out = torch.where(x == math.inf, x - x, out)  # inf - inf: NaN there, as torch gives
            return out

        table[aten.gelu.default] = gelu
    table[aten.full_like.default] = _full_like  # cross-entropy's backward starts from one
    return table


def _full_like(x: torch.Tensor, fill_value: Any, **kwargs: Any) -> torch.Tensor:
    """``full_like`` as ``prims.full`` (which the lowering inlines), in a fresh tensor's layout:
    torch's own ``full`` decomposes through ``fill``, which comes back to ``full_like``."""
    dtype, device = kwargs.get("dtype") or x.dtype, kwargs.get("device") or x.device
    return torch.ops.prims.full.default(list(x.shape), fill_value, dtype=dtype, device=device, requires_grad=False)


@dataclass(frozen=True)
class Traced:
    graph: fx.GraphModule
    params: list[str]  # the first placeholders, in this order
    buffers: list[str]  # then these
    inputs: int  # then the op's inputs
    constants: list[str] = field(default_factory=list)  # plain tensor attributes, after the buffers
    # what forward returns: "single", "tuple", a torch.return_types record's dotted name, or None
    # for a structure the candidate cannot return as it is (a list, a nested tuple, a dict)
    out_kind: str | None = "single"
    # traced through a call template (``module_call``): the structure around the outputs, which
    # the graph returns flat (a tuple of its tensors)
    layout: str | None = None

    @property
    def state_names(self) -> list[str]:
        """The module's parameter, buffer and plain tensor attribute names, in the order of the
        first placeholders."""
        return [*self.params, *self.buffers, *self.constants]


def plain_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """Tensors a module (or a submodule) holds as plain attributes, neither parameters nor
    registered buffers (``self.mask = torch.tril(...)``), by dotted name. Traced as graph inputs
    like the buffers: a real tensor inside the fake-tensor trace would fail it, and the candidate
    reads them from its own module, as the reference does."""
    found: dict[str, torch.Tensor] = {}
    for prefix, module in model.named_modules():
        for name, value in vars(module).items():
            # fx.symbolic_trace (the hand-tuned families') leaves the constants it lifts on the
            # traced module as _tensor_constant<k>: not attributes a fresh ModelNew has
            if re.fullmatch(r"_tensor_constant\d+", name):
                continue
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                found[f"{prefix}.{name}" if prefix else name] = value
    return found


def trace(model: nn.Module, inputs: Sequence[Any], call: str | None = None) -> Traced:
    """``model(*inputs)`` as a graph of primitives and kept ops (fake tensors: nothing is computed);
    ``call``: the call's template (``module_call``), ``inputs`` its tensors; the graph then
    returns the output's tensors flat, as a tuple, and ``Traced.layout`` says how they sat."""
    params, buffers = dict(model.named_parameters()), dict(model.named_buffers())
    constants = plain_tensors(model)

    returned: list[str | None] = []
    layouts: list[str] = []

    def pure(p: dict[str, Any], b: dict[str, Any], c: dict[str, Any], *xs: Any) -> Any:
        if call is None:
            out = functional_call(model, {**p, **b, **c}, xs)
            returned.append(output_kind(out))
            return out
        args, kwargs = call_arguments(call, xs)
        out = functional_call(model, {**p, **b, **c}, tuple(args), kwargs)
        layouts.append(output_layout(out))
        returned.append("tuple")
        return tuple(output_tensors(out))

    device = next((x.device.type for x in inputs if isinstance(x, torch.Tensor)), "cpu")
    traced = make_fx(pure, decomposition_table=decompositions(device), tracing_mode="fake")
    graph = traced(params, buffers, constants, *inputs)
    # Values the op never uses (eval-mode BatchNorm's decomposition makes empty saved statistics)
    # are not computed: nothing would read them.
    graph.graph.eliminate_dead_code()
    graph.recompile()
    layout = layouts[0] if layouts else None
    return Traced(graph, list(params), list(buffers), len(inputs), list(constants), returned[0], layout)


def output_kind(out: Any) -> str | None:
    """single, tuple, or the torch.return_types record ``out`` is (torch.max over a dim returns
    one, and the candidate returns the same type); None: any other structure."""
    if isinstance(out, torch.Tensor):
        return "single"
    if isinstance(out, tuple) and all(isinstance(x, torch.Tensor) for x in out):
        return "tuple" if type(out) is tuple else f"{type(out).__module__}.{type(out).__qualname__}"
    return None


def packet_name(node: fx.Node) -> str:
    """``aten.cumsum`` for ``aten.cumsum.default``; the node's own name for Python builtins."""
    target = node.target
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return f"{target.namespace}.{packet.__name__}"  # type: ignore[union-attr]
    return getattr(target, "__name__", str(target))


def unloweable(traced: Traced) -> list[str]:
    """Why a node cannot become a kernel, one line per such node (empty: every node can)."""
    why = []
    data_dependent = {f"aten.{p.__name__}" for p in DATA_DEPENDENT}
    for node in traced.graph.graph.nodes:
        if node.op != "call_function":
            continue
        if packet_name(node) in data_dependent:
            why.append(f"{packet_name(node)}: its output size depends on the data")
        elif kind_of(node) is None:
            why.append(f"{packet_name(node)}: not in the lowering's node set")
    return why
