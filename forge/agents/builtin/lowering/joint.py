"""A reference's backward, derived from torch's own joint graph: the forward and the backward the
built-in coder lowers for training.

``aot_function`` traces the op's forward and its autograd backward together, with the lowering's
decomposition table, and partitions them with torch.compile's min-cut: the least saved for the
backward, with pointwise values recomputed there, reductions' results saved, and the op's inputs
and outputs free to save (they exist anyway). Cross-entropy's forward then saves a few values per
row and its backward reads the logits once; softmax's backward reads the softmax. That gives two
graphs:

- the forward: (parameters, buffers, tensor attributes, inputs) -> (outputs, saved values);
- the backward: (saved values, output gradients) -> a gradient for each of the forward's inputs.

Both are graphs of the same primitives the inference lowering takes, so ``schedule`` and the
emitters write them unchanged. A graph returns values of three kinds, and only the first is a
buffer a kernel writes: a value it computes, one of its own inputs passed through (an output
gradient that is an input's gradient, a parameter saved for the backward), or nothing (a
gradient nobody asked for). ``Route`` records where each returned value comes from, so the
graphs the kernels are written from return computed values only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import torch
from functorch.compile import make_boxed_func
from torch import fx, nn
from torch._functorch import config as functorch_config
from torch._functorch.aot_autograd import aot_function
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch.func import functional_call
from torch.utils.checkpoint import CheckpointPolicy

from forge.agents.builtin.lowering.schedule import Schedule, StepKind, schedule
from forge.agents.builtin.lowering.trace import (
    NodeKind,
    Traced,
    decompositions,
    kind_of,
    plain_tensors,
    unloweable,
)


class Source(StrEnum):
    """Where a graph's returned value comes from."""

    COMPUTED = "computed"  # a buffer the graph's kernels write
    GIVEN = "given"  # one of the graph's own inputs, returned as it is
    NONE = "none"  # no value (a gradient of an input that needs none)


@dataclass(frozen=True)
class Route:
    source: Source
    index: int = 0  # into the computed values, or into the graph's inputs


@dataclass(frozen=True)
class JointTrace:
    """The forward and backward graphs of one op, each returning its computed values only."""

    forward: Traced  # inputs: the state (``state``), then the op's inputs
    backward: Traced  # inputs: the saved values, then one gradient per output
    state: list[str]  # the module's parameters, buffers and tensor attributes, as the forward takes them
    outputs: list[Route]  # the op's outputs, from the forward
    saved: list[Route]  # the values the backward takes, from the forward
    grads: list[Route]  # a gradient per forward input (state, then the op's inputs), from the backward


def trace_joint(model: nn.Module, inputs: Sequence[torch.Tensor]) -> JointTrace | str:
    """The forward and backward graphs of ``model(*inputs)`` as the module's mode computes them,
    for gradients of every parameter and every floating input; or why they cannot be had."""
    # copies: the traced backward runs once, and must not leave gradients on the module's own
    params = {n: p.detach().clone().requires_grad_(p.requires_grad) for n, p in model.named_parameters()}
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    constants = plain_tensors(model)
    graphs: dict[str, fx.GraphModule] = {}

    def keep(name: str) -> Any:
        def compiler(gm: fx.GraphModule, _example: Any) -> Any:
            graphs[name] = gm
            return make_boxed_func(gm.forward)

        return compiler

    def pure(p: dict[str, Any], b: dict[str, Any], c: dict[str, Any], *xs: Any) -> Any:
        return functional_call(model, {**p, **b, **c}, xs)

    leaves = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    device = next((x.device.type for x in inputs), "cpu")
    joint = aot_function(
        pure,
        fw_compiler=keep("forward"),
        bw_compiler=keep("backward"),
        partition_fn=_inputs_free_to_save(len(params) + len(buffers) + len(constants) + len(leaves)),
        decompositions=decompositions(device),
    )
    try:
        out = joint(params, buffers, constants, *leaves)
        outs = [out] if isinstance(out, torch.Tensor) else list(out)
        if not all(isinstance(o, torch.Tensor) and o.is_floating_point() and o.requires_grad for o in outs):
            return "the training kernels take ops whose outputs are all floating tensors with a gradient"
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
    except Exception as exc:
        return f"the reference's backward could not be traced ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    if set(graphs) != {"forward", "backward"}:
        return "the reference's backward could not be traced"
    return _split(graphs["forward"], graphs["backward"], [*params, *buffers, *constants], len(inputs), len(outs))


# ``functorch_config.patch`` sets a process-wide flag: two traces at once (the TUI's threads) would
# see it flip under them
_PARTITIONING = threading.Lock()


def _inputs_free_to_save(n_primals: int) -> Any:
    """torch.compile's min-cut, with every input of the forward free to save: the caller holds
    them anyway, so saving one costs no memory and its backward reads it where saving a value
    computed from it would cost a write and a read."""

    def partition(joint: fx.GraphModule, joint_inputs: Any, *, num_fwd_outputs: int, **_aot: Any) -> Any:
        free = list(range(n_primals))  # aot's own choice (the parameters) is a subset of these
        _saved_not_recomputed(joint, num_fwd_outputs)
        # its list of ops it may recompute names aten ops, and these graphs are prims: without
        # this, nothing is recomputed and every value the backward reads is written and saved
        with _PARTITIONING, functorch_config.patch(aggressive_recomputation=True):
            return min_cut_rematerialization_partition(
                joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, static_lifetime_input_indices=free
            )

    return partition


def _saved_not_recomputed(joint: fx.GraphModule, num_fwd_outputs: int) -> None:
    """Marks what the backward must read rather than compute again: every value that is not
    pointwise, a view or a tuple item (a reduction, a scan, a pooling, attention or another
    library call: costly, where a pointwise value is a few instructions in a pass the backward
    makes anyway), and the op's outputs with the values they view (they exist anyway: softmax's
    backward reads the softmax)."""
    cheap = (NodeKind.POINTWISE, NodeKind.VIEW, NodeKind.OTHER)
    for node in joint.graph.nodes:
        if node.op == "call_function" and kind_of(node) not in cheap:
            node.meta["recompute"] = CheckpointPolicy.MUST_SAVE
    output = next(n for n in joint.graph.nodes if n.op == "output")
    for value in output.args[0][:num_fwd_outputs]:
        while isinstance(value, fx.Node) and value.op == "call_function":
            value.meta["recompute"] = CheckpointPolicy.MUST_SAVE
            value = value.args[0] if kind_of(value) is NodeKind.VIEW else None


def _split(
    forward: fx.GraphModule, backward: fx.GraphModule, state: list[str], n_in: int, n_out: int
) -> JointTrace | str:
    if len([n for n in forward.graph.nodes if n.op == "placeholder"]) != len(state) + n_in:
        # aot merges arguments that are one tensor (two attributes holding it): the routes, by
        # position, would give one tensor's gradient to another
        return "the forward for training takes other values than the module's state and the op's inputs"
    fw_returns = _returned(forward)
    fw_routes = _computed_only(forward, fw_returns)
    bw_inputs = [n for n in backward.graph.nodes if n.op == "placeholder"]
    n_saved = len(fw_returns) - n_out
    if len(bw_inputs) != n_saved + n_out:
        return "the reference's backward takes other values than its forward saves"
    bw_routes = _computed_only(backward, _returned(backward))
    fw = Traced(forward, [], [], len([n for n in forward.graph.nodes if n.op == "placeholder"]), out_kind="tuple")
    bw = Traced(backward, [], [], len(bw_inputs), out_kind="tuple")
    for graph, name in ((fw, "forward"), (bw, "backward")):
        if why := unloweable(graph):
            return f"in the {name} for training, {why[0]}"
    return JointTrace(fw, bw, state, fw_routes[:n_out], fw_routes[n_out:], bw_routes)


def _returned(gm: fx.GraphModule) -> list[Any]:
    output = next(n for n in gm.graph.nodes if n.op == "output")
    values = output.args[0]
    return list(values) if isinstance(values, list | tuple) else [values]


def _computed_only(gm: fx.GraphModule, returned: list[Any]) -> list[Route]:
    """Rewrites ``gm`` to return each value it computes once (in first-returned order) and says
    where every value it returned before comes from."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    computed: list[fx.Node] = []
    routes = []
    for value in returned:
        if value is None:
            routes.append(Route(Source.NONE))
        elif value.op == "placeholder":
            routes.append(Route(Source.GIVEN, placeholders.index(value)))
        else:
            if value not in computed:
                computed.append(value)
            routes.append(Route(Source.COMPUTED, computed.index(value)))
    output = next(n for n in gm.graph.nodes if n.op == "output")
    output.args = (tuple(computed),)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return routes


@dataclass(frozen=True)
class JointLowered:
    """A joint trace with both graphs scheduled."""

    trace: JointTrace
    forward: Schedule
    backward: Schedule

    @property
    def graphs(self) -> tuple[tuple[Traced, Schedule], tuple[Traced, Schedule]]:
        return ((self.trace.forward, self.forward), (self.trace.backward, self.backward))


def lower_joint(
    model: nn.Module, inputs: Sequence[torch.Tensor], run_by_torch: frozenset[StepKind]
) -> JointLowered | str:
    """``trace_joint`` in training mode, both graphs scheduled (raises Unsupported as ``schedule``
    does), or why the op's backward cannot be had."""
    was_training = model.training
    try:
        traced = trace_joint(model.train(), inputs)
    finally:
        model.train(was_training)
    if isinstance(traced, str):
        return traced
    return JointLowered(traced, schedule(traced.forward, run_by_torch), schedule(traced.backward, run_by_torch))


__all__ = ["JointLowered", "JointTrace", "Route", "Source", "lower_joint", "trace_joint"]
