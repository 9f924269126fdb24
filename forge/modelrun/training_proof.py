"""Proving a kernelized model in training (``forge optimize MODEL --modules --train``), in the
probe's process: a fresh instance kernelized with everything banked takes one training step beside
the original (same weights, same inputs, same random state, the same fixed output gradients), and
its outputs and every parameter's gradient are compared; then both take training steps round by
round, beside a copy of the original (the null), in both cache regimes. A kernel whose backward is
not used under autograd runs the reference there, as a user's training would."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

import forge.kernelbank as kb
from forge.core.model_records import OpCalls, TrainingProof
from forge.modelrun.proving import compare_outputs, outputs_of, time_four_ways
from forge.modelrun.source import LoadedModel

_FRESH_SEED = 20261127  # inputs and output gradients none of the sessions saw
_STEP_SEED = 7  # the random state each step starts from (dropout draws the same masks on both sides)

Step = Callable[[list[Any]], list[torch.Tensor]]


def training_step(model: torch.nn.Module, grads_out: list[torch.Tensor]) -> Step:
    """One training step of ``model``: gradients cleared, the forward from a fixed random state,
    the backward of ``grads_out``; it returns the outputs, then every parameter's gradient (zeros
    for a parameter the step does not reach)."""
    params = [p for p in model.parameters() if p.requires_grad]

    def step(inputs: list[Any]) -> list[torch.Tensor]:
        for p in params:
            p.grad = None
        torch.manual_seed(_STEP_SEED)
        with torch.enable_grad():  # the timing loop runs its sides under no_grad
            outs = outputs_of(model(*inputs))
            pairs = [(o, g) for o, g in zip(outs, grads_out, strict=True) if o.requires_grad]
            if pairs:
                torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        return [o.detach() for o in outs] + grads

    return step


def compare_steps(original: Step, kernelized: Step, inputs: list[Any]) -> tuple[bool, float | None, str, str]:
    """(match, largest difference, tolerance, the first difference) of one step of each."""
    want, got = original(inputs), kernelized(inputs)
    match, worst, tolerance, detail = compare_outputs(want, got)
    return match, worst, tolerance, detail.replace("output ", "value ", 1) if detail else ""


def prove_training(loaded: LoadedModel, bank_path: str | None, device: str, rounds: int) -> TrainingProof:
    """Kernelize a fresh model in training mode, compare a training step with the original's, and
    time training steps (eager, kernelized, the eager null), warm and cold."""
    torch.manual_seed(0)
    original = loaded.build().train().to(device)
    kernelized = copy.deepcopy(original)
    twin = copy.deepcopy(original)
    bank = kb.open(bank_path)
    bank.kernelize(kernelized)
    torch.manual_seed(_FRESH_SEED)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in loaded.inputs()]
    with torch.no_grad():
        shapes = outputs_of(copy.deepcopy(original)(*inputs))  # a copy: a training forward updates state
    grads_out = [torch.randn(o.shape, dtype=o.dtype, device=o.device) if o.is_floating_point() else o for o in shapes]
    steps = {name: training_step(m, grads_out) for name, m in (("eager", original), ("kernelized", kernelized))}
    with bank.watch() as seen:
        match, worst, tolerance, detail = compare_steps(steps["eager"], steps["kernelized"], inputs)
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
