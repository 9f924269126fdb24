"""The built-in coder's ``inductor`` family: the op's first candidate is what torch.compile's
Inductor generates for it (C++/OpenMP on a CPU, Triton on a GPU), captured once per set of options
(``capture``; in a process of its own where the op has a file, ``capture_apart``: a capture can
corrupt the memory of the process it runs in) and written as a candidate that runs the generated kernels with no
torch.compile at run time (``program``). The search varies the options Inductor exposes for the
device (``space``); in a session it competes with the hand-tuned families and the general
lowering (``forge.agents.builtin.coder``), and the judge ranks them on one table."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from forge.agents.builtin.inductor.capture import (
    Captured,
    InductorRefused,
    OpCall,
    TrainMode,
    call_op,
    capture,
    train_mode,
)
from forge.agents.builtin.inductor.capture_apart import capture_apart
from forge.agents.builtin.inductor.program import render as render_program
from forge.core.module_call import output_layout, rebuildable

# knob -> (Inductor option, values; the first is Inductor's default)
CPU_KNOBS: dict[str, tuple[str, list[Any]]] = {
    "ind_chunk": ("cpp.min_chunk_size", [512, 4096, 64]),  # the work below which a loop runs on one thread
    "ind_fusion": ("aggressive_fusion", [False, True]),  # fuse nodes that share no memory
    "ind_tiling": ("cpp.enable_tiling_heuristics", [True, False]),
}
GPU_KNOBS: dict[str, tuple[str, list[Any]]] = {
    "ind_autotune": ("max_autotune", [False, True]),  # Triton matmul templates, pointwise configs benchmarked
    "ind_coordinate": ("coordinate_descent_tuning", [False, True]),  # block sizes, warps tuned per kernel
    "ind_persistent": ("triton.persistent_reductions", [True, False]),
    "ind_fusion": ("aggressive_fusion", [False, True]),
}


def knobs(device: str) -> dict[str, tuple[str, list[Any]]]:
    """The Inductor options searched on ``device``: SIMD width where the CPU has more than one."""
    if device == "cuda":
        return GPU_KNOBS
    out = dict(CPU_KNOBS)
    if "512" in torch.backends.cpu.get_cpu_capability():
        out["ind_simd"] = ("cpp.simdlen", [None, 256])  # AVX-512 or AVX2 vectors
    return out


@dataclass
class InductorRecipe:
    """One op as the capture sees it, and the captures made so far (by options and mode)."""

    model: torch.nn.Module
    inputs: list[Any]
    op: OpCall
    train: TrainMode
    device: str
    # where the op's file is: its captures run in a process of their own (``capture_apart``);
    # None: in this one (an op given as a module)
    op_path: Path | None = None
    # by (Inductor's options, sorted; training mode)
    captured: dict[tuple[tuple[tuple[str, Any], ...], bool], Captured] = field(default_factory=dict)


def _options(recipe: InductorRecipe, config: dict[str, Any] | None) -> dict[str, Any]:
    table = knobs(recipe.device)
    chosen = {k: values[0] for k, (_, values) in table.items()}
    chosen |= {k: v for k, v in (config or {}).items() if k in table}
    return {table[k][0]: v for k, v in sorted(chosen.items())}


def _captured(recipe: InductorRecipe, config: dict[str, Any] | None, training: bool = False) -> Captured:
    options = _options(recipe, config)
    key = (tuple(sorted(options.items())), training)
    if key not in recipe.captured:
        if recipe.op_path is not None:
            recipe.captured[key] = capture_apart(recipe.op_path, recipe.device, options, training=training)
        else:
            recipe.captured[key] = capture(recipe.model, recipe.inputs, recipe.op.call, options, training=training)
    return recipe.captured[key]


def analyze(
    model: torch.nn.Module,
    inputs: list[Any],
    call: str | None = None,
    device: str = "cpu",
    op_path: Path | None = None,
) -> InductorRecipe | str:
    """The recipe, Inductor's code for ``device`` at its defaults captured and checked; or why
    it cannot be (``model`` is moved there; the recipe keeps it). With ``op_path`` (the file
    ``model`` and ``inputs`` were built from), every capture runs in a process of its own."""
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        return "Inductor's code is captured for ops whose inputs are all tensors"
    if device == "cuda" and not torch.cuda.is_available():
        return "Inductor's Triton code is captured on a GPU, and this machine has none"
    try:
        return _recipe(model.to(device), [x.to(device) for x in inputs], call, device, op_path)
    except InductorRefused as exc:
        return f"Inductor's code cannot run as a candidate: {exc}"
    except Exception as exc:  # the op's own code raising in a mode the capture tries (a batch of one in training)
        return f"Inductor's code cannot run as a candidate: {type(exc).__name__}: {exc}"


def _recipe(
    model: torch.nn.Module, inputs: list[Any], call: str | None, device: str, op_path: Path | None
) -> InductorRecipe:
    with torch.no_grad():
        out = call_op(model.eval(), inputs, call)
    layout = output_layout(out)
    if not rebuildable(layout):
        raise InductorRefused(f"its output ({layout}) is not one a candidate can rebuild")
    train = train_mode(model, inputs, call)
    if train is TrainMode.OTHER:
        with torch.no_grad():
            trained = output_layout(call_op(copy.deepcopy(model).train(), inputs, call))
        if trained != layout:
            raise InductorRefused(f"its output is {trained} in training mode and {layout} in eval mode")
    recipe = InductorRecipe(model, inputs, OpCall(call, layout), train, device, op_path)
    _captured(recipe, None)
    if train is TrainMode.OTHER:
        _captured(recipe, None, training=True)
    return recipe


def space(recipe: InductorRecipe) -> dict[str, list[Any]]:
    return {k: list(values) for k, (_, values) in knobs(recipe.device).items()}


def render(recipe: InductorRecipe, config: dict[str, Any] | None) -> str:
    """The candidate for ``config``; a config whose capture is refused renders the reason as a
    candidate that fails to import (the verdict shows it, the tuner bans the value)."""
    try:
        eval_code = _captured(recipe, config)
        train_code = _captured(recipe, config, training=True) if recipe.train is TrainMode.OTHER else None
    except Exception as exc:  # InductorRefused, or an option Inductor rejects
        return f"raise ImportError({f'Inductor with these options: {exc}'!r})\n"
    return render_program(eval_code, train_code, recipe.train, recipe.op, _options(recipe, config))


__all__ = ["CPU_KNOBS", "GPU_KNOBS", "InductorRecipe", "analyze", "knobs", "render", "space"]
