"""Gradient cases, as both workers run them: a forward with the op's floating inputs requiring
grad, then a backward of given gradients into its outputs, and every gradient by name.

The reference's worker draws the inputs and the output gradients and runs its autograd; the
candidate's worker runs the same inputs and output gradients through ``ModelNew`` (whatever
backward it provides: a ``torch.autograd.Function``, a custom op with ``register_autograd``, or
torch's autograd over its own ops). Names are the reference's: ``input 0`` for the op's first
input, ``parameter norm.weight`` for a parameter (the candidate holds the reference's
``state_dict``, so the names agree).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from forge.core.errors import ProblemError, first_said
from forge.core.module_call import output_tensors
from forge.verifier.protocol import GradDataReply, GradDataRequest, GradRunReply
from forge.verifier.worker.call_form import invoke
from forge.verifier.worker.custom_op_checks import CustomOpReport, check_custom_ops
from forge.verifier.worker.model_state import grad_leaves, state_kept
from forge.verifier.worker.output_copies import plain_copy
from forge.verifier.worker.reference_cases import widened


def draw_grad_outputs(outputs: Sequence[Any], seed: int) -> list[torch.Tensor]:
    """A gradient for each output: standard normal for a floating output, an empty placeholder
    for another (an index output carries no gradient)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    drawn = []
    for o in outputs:
        if isinstance(o, torch.Tensor) and o.is_floating_point():
            drawn.append(torch.randn(o.shape, generator=g, dtype=torch.float32).to(o.dtype).to(o.device))
        else:
            drawn.append(torch.empty(0))
    return drawn


def _clone(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach().clone()


@dataclass
class BackwardRun:
    """What ``backward_run`` saw: the outputs, the output gradients used, the gradients by name,
    and whether any output carried an autograd graph (none: the model provides no backward)."""

    outputs: list[Any]
    grad_outputs: list[torch.Tensor]
    grads: dict[str, torch.Tensor | None]
    differentiable: bool


def backward_run(
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    grad_outputs: Sequence[torch.Tensor] | None = None,
    seed: int = 0,
) -> BackwardRun:
    """``model`` forward on copies of ``inputs`` (floating ones requiring grad), then backward of
    ``grad_outputs`` (drawn with ``seed`` from the outputs when None): the outputs, the output
    gradients used, and the gradients of the inputs and parameters by name. The model's buffers
    and its parameters' ``.grad`` are as they were afterwards."""
    leaves = grad_leaves(inputs)
    with state_kept(model) as params:
        with torch.enable_grad():
            outs = output_tensors(invoke(model, leaves))
        given = list(grad_outputs) if grad_outputs is not None else draw_grad_outputs(outs, seed)
        pairs = _with_grads(outs, given)
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        grads: dict[str, torch.Tensor | None] = {
            f"input {j}": _clone(x.grad) for j, x in enumerate(leaves) if x.is_floating_point()
        }
        grads.update({f"parameter {name}": _clone(p.grad) for name, p in params})
        detached = [o.detach() if isinstance(o, torch.Tensor) else o for o in outs]
        return BackwardRun(detached, given, grads, bool(pairs))


def _with_grads(outs: Sequence[Any], given: Sequence[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each output that carries a graph, with its given gradient (on its device)."""
    return [
        (o, g.to(o.device))
        for o, g in zip(outs, given, strict=False)
        if isinstance(o, torch.Tensor) and o.requires_grad and g.numel() == o.numel()
    ]


def second_order(
    model: torch.nn.Module, inputs: Sequence[torch.Tensor], grad_outputs: Sequence[torch.Tensor]
) -> dict[str, bool] | str:
    """A backward with ``create_graph=True`` (a gradient penalty's, a Hessian-vector product's):
    by name, whether each gradient carries an autograd graph; or, where it raises, what it said
    (a backward that refuses it says so loudly, which is right). A gradient without a graph where
    the reference's has one is a second-order term silently dropped."""
    leaves = grad_leaves(inputs)
    with state_kept(model) as params:
        wrt = [x for x in leaves if x.is_floating_point()] + [p for _, p in params]
        names = [f"input {j}" for j, x in enumerate(leaves) if x.is_floating_point()]
        names += [f"parameter {name}" for name, _ in params]
        with torch.enable_grad():  # the forward's failures are the gradient case's, not excused here
            pairs = _with_grads(output_tensors(invoke(model, leaves)), grad_outputs)
            if not pairs:
                return {}
            try:
                found = torch.autograd.grad(
                    [o for o, _ in pairs], wrt, [g for _, g in pairs], create_graph=True, allow_unused=True
                )
            except Exception as exc:
                return f"{type(exc).__name__}: {first_said(exc, 200)}"
    if any(g is not None and "DelayedError" in type(g.grad_fn).__name__ for g in found):
        return "once_differentiable: a backward through its gradients raises"
    return {name: g is not None and g.requires_grad for name, g in zip(names, found, strict=True)}


def candidate_case(
    module: ModuleType,
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    grad_outputs: Sequence[torch.Tensor],
    twice: bool,
) -> GradRunReply:
    """The candidate's side of a gradient case: ``backward_run``, and with ``twice`` its
    ``second_order`` and the opcheck of the custom ops its module defines."""
    done = backward_run(model, inputs, grad_outputs)
    ops = check_custom_ops(module, model, inputs) if twice else CustomOpReport([])
    return GradRunReply(
        outputs=[plain_copy(o) for o in done.outputs],
        grads={name: None if g is None else plain_copy(g) for name, g in done.grads.items()},
        differentiable=done.differentiable,
        second_order=second_order(model, inputs, grad_outputs) if twice else None,
        custom_ops=ops.checked,
        custom_op_failure=ops.failure,
    )


def training_step(model: torch.nn.Module) -> Callable[[Sequence[Any]], Any]:
    """What both workers time for a training step of the op: the forward with the floating inputs
    requiring grad, then the backward of fixed output gradients into the inputs and parameters
    (their ``.grad`` set to None first, as ``zero_grad`` does, and taken off again after). Returns
    the forward's outputs, detached, then the gradients of the floating inputs and of the
    parameters by name (an empty tensor for none): the parent compares every timed step's with
    the reference's (``reference_step``), so a backward that skips its work once timed fails. The
    output gradients are drawn once per output shape, from the same seeds on both sides: the same
    values every step, and not ones, which a kernel could special-case."""
    params = sorted((name, p) for name, p in model.named_parameters() if p.requires_grad)
    fixed: dict[tuple[Any, ...], torch.Tensor] = {}

    def grad_for(out: torch.Tensor, k: int) -> torch.Tensor:
        key = (k, tuple(out.shape), out.dtype, out.device)
        if key not in fixed:
            g = torch.Generator(device="cpu").manual_seed(1000 + k)
            fixed[key] = torch.randn(out.shape, generator=g).to(out.dtype).to(out.device)
        return fixed[key]

    def step(inputs: Sequence[Any]) -> tuple[Any, ...]:
        for _, p in params:
            p.grad = None
        leaves = [
            x.detach().requires_grad_() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
        ]
        with torch.enable_grad():
            out = invoke(model, leaves)
            outs = output_tensors(out)
            pairs = [(o, grad_for(o, k)) for k, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.requires_grad]
            if pairs:
                torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        found = [x.grad for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]
        found += [p.grad for _, p in params]
        for _, p in params:
            p.grad = None
        outputs = [o.detach() if isinstance(o, torch.Tensor) else o for o in outs]
        return (*outputs, *(torch.empty(0) if g is None else g for g in found))

    return step


def float64_backward(
    model: torch.nn.Module, inputs: Sequence[torch.Tensor], grad_outputs: Sequence[torch.Tensor]
) -> BackwardRun | None:
    """``backward_run`` of a float64 copy of ``model`` on float64 copies of the inputs and output
    gradients: what a stress case's float32 gradients approximate (``compare.beside_exact``).
    None where the reference does not run so."""
    try:
        wide, both = widened(model, [*inputs, *grad_outputs])
        return backward_run(wide, both[: len(inputs)], both[len(inputs) :])
    except Exception:
        return None  # any failure only means there is no exact reference


def reference_case(request: GradDataRequest, model: torch.nn.Module, inputs: list[torch.Tensor]) -> GradDataReply:
    """The reference's side of a gradient case: its outputs and gradients on ``inputs``, for
    output gradients drawn with the request's seed, and on stress inputs the same in float64.
    Raises ProblemError when the reference has no backward to compare with."""
    try:
        done = backward_run(model, inputs, seed=request.seed + 1)
    except Exception as exc:
        raise ProblemError(f"the reference's backward fails: {type(exc).__name__}: {exc}") from exc
    if not done.differentiable:
        raise ProblemError("the reference's outputs carry no gradient: there is no backward to verify")
    wide = float64_backward(model, inputs, done.grad_outputs) if request.inputs != "normal" else None
    graphs = second_order(model, inputs, done.grad_outputs) if request.second_order else None
    return GradDataReply(
        model=request.model,
        inputs=inputs,
        grad_outputs=done.grad_outputs,
        expected=done.outputs,
        grads=done.grads,
        exact=wide.outputs if wide else None,
        exact_grads=wide.grads if wide else None,
        second_order=graphs if isinstance(graphs, dict) else None,  # the reference's own refusal: no check
    )
