"""Proving a kernelized model in training (``forge optimize MODEL --modules --train``), in the
probe's process: a fresh instance kernelized with everything banked takes one training step beside
the original (same weights, same inputs, same random state, the same fixed output gradients), and
its outputs, every parameter's gradient and every buffer after the step (BatchNorm's running
statistics) are compared; then both take training steps round by round, beside a copy of the
original (the null), in both cache regimes. A kernel whose backward is not used under autograd
runs the reference there, as a user's training would."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

import forge.kernelbank as kb
from forge.core.errors import first_said
from forge.core.model_records import OpCalls, TrainingProof
from forge.model_probe.proving import compare_outputs, outputs_of, time_four_ways
from forge.model_probe.source import LoadedModel

_FRESH_SEED = 20261127  # inputs and output gradients none of the sessions saw
_STEP_SEED = 7  # the random state each step starts from (dropout draws the same masks on both sides)

Step = Callable[[list[Any]], dict[str, torch.Tensor]]


def training_step(model: torch.nn.Module, grads_out: list[torch.Tensor]) -> Step:
    """One training step of ``model``: gradients cleared, the forward from a fixed random state,
    the backward of ``grads_out``; it returns, by name, the outputs, every parameter's gradient
    (zeros for one the step does not reach) and every buffer as the step left it."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]

    def step(inputs: list[Any]) -> dict[str, torch.Tensor]:
        for _, p in params:
            p.grad = None
        torch.manual_seed(_STEP_SEED)
        with torch.enable_grad():  # the timing loop runs its sides under no_grad
            outs = outputs_of(model(*inputs))
            pairs = [(o, g) for o, g in zip(outs, grads_out, strict=True) if o.requires_grad]
            if pairs:
                torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        values = {f"output {k}": o.detach() for k, o in enumerate(outs)}
        values.update(
            {f"the gradient of {n}": p.grad if p.grad is not None else torch.zeros_like(p) for n, p in params}
        )
        values.update({f"buffer {n}": b.detach().clone() for n, b in model.named_buffers()})
        return values

    return step


def compare_steps(want: dict[str, torch.Tensor], got: dict[str, torch.Tensor]) -> tuple[bool, float | None, str, str]:
    """(match, largest difference, tolerance, the first difference, named) of two steps' values."""
    worst, tolerance = 0.0, ""
    for name, value in want.items():
        match, diff, tol, detail = compare_outputs(value, got[name])
        worst, tolerance = max(worst, diff or 0.0), tol or tolerance
        if not match:
            return False, worst, tolerance, detail.replace("output 0", name, 1)
    return True, worst, tolerance, ""


def prove_training(loaded: LoadedModel, bank_path: str | None, device: str, rounds: int) -> TrainingProof:
    """Kernelize a fresh model in training mode, compare a training step with the original's, and
    time training steps (eager, kernelized, the eager null), warm and cold."""
    torch.manual_seed(0)
    original = loaded.build().train().to(device)
    kernelized, twin = copy.deepcopy(original), copy.deepcopy(original)
    bank = kb.open(bank_path)
    bank.kernelize(kernelized)
    torch.manual_seed(_FRESH_SEED)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in loaded.inputs()]
    with torch.enable_grad():
        outs = outputs_of(copy.deepcopy(original)(*inputs))  # a copy: a training forward updates state
    if not any(p.requires_grad for p in original.parameters()) or not any(o.requires_grad for o in outs):
        return TrainingProof.refused("nothing to train: no output of the model carries a gradient to a parameter")
    grads_out = [torch.randn(o.shape, dtype=o.dtype, device=o.device) if o.is_floating_point() else o for o in outs]
    steps = {"eager": training_step(original, grads_out), "kernelized": training_step(kernelized, grads_out)}
    try:
        want = steps["eager"](inputs)
    except Exception as exc:
        return TrainingProof.refused(
            f"the original model's training step raised {type(exc).__name__}: {first_said(exc)}"
        )
    with bank.watch() as seen:
        try:
            got = steps["kernelized"](inputs)
        except Exception as exc:
            return TrainingProof.refused(
                f"the kernelized model's training step raised {type(exc).__name__}: {first_said(exc)}"
            )
    match, worst, tolerance, detail = compare_steps(want, got)
    proof = TrainingProof(
        ops=[OpCalls(op=u.op, calls=u.calls, kernel_calls=u.kernel_calls) for u in seen.ops.values()],
        gradients_match=match,
        max_abs_diff=worst,
        tolerance=tolerance,
        detail=detail,
    )
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if match and len(tensors) == len(inputs):
        sides = {**steps, "eager_twin": training_step(twin, grads_out)}
        proof.timings = [time_four_ways(sides, tensors, device, rounds, cold) for cold in (False, True)]
    return proof
