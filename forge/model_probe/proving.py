"""Proving a kernelized model end to end, in the probe's process: a fresh instance kernelized with
everything banked (all kernels in place at once) against the original on fresh inputs, then the
four ways of running it timed round by round: eager, kernelized, torch.compile, kernelized and
compiled (``kernelize``'s default mode: under compile only kernels that beat it), beside a copy
of the original in eager and compiled (the nulls: what two runs of one model read apart)."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

import forge.kernelbank as kb
from forge.core.errors import first_said
from forge.core.model_records import FourWay, ModelProof, OpCalls
from forge.core.pairing import paired_ratio
from forge.model_probe.source import LoadedModel
from forge.verifier.machine.facts import flush_bytes
from forge.verifier.worker.timing.plain_loop import time_sides

_COMPILED_DIFFERS = "the kernelized model compiled gives other outputs than the original"
_FRESH_SEED = 20261126  # inputs none of the sessions saw
_TOLERANCE = {torch.float32: 1e-3, torch.float64: 1e-6, torch.float16: 2e-2, torch.bfloat16: 5e-2}


def outputs_of(out: Any) -> list[torch.Tensor]:
    """Every tensor in the output (tuples, lists, dicts and dataclass-like outputs flattened)."""
    return [o for o in tree_leaves(out) if isinstance(o, torch.Tensor)]


def compare_outputs(expected: Any, got: Any) -> tuple[bool, float | None, str, str]:
    """(match, largest difference, tolerance used, the first difference)."""
    want, have = outputs_of(expected), outputs_of(got)
    if not want:
        return False, None, "", f"the model returns no tensor forge can compare (a {type(expected).__name__})"
    if len(want) != len(have):
        return False, None, "", f"{len(have)} outputs, the original gives {len(want)}"
    worst, tolerance = 0.0, ""
    for i, (w, h) in enumerate(zip(want, have, strict=True)):
        if w.shape != h.shape or w.dtype != h.dtype:
            return (
                False,
                None,
                "",
                f"output {i} is {h.dtype} {tuple(h.shape)}, the original's {w.dtype} {tuple(w.shape)}",
            )
        tol = _TOLERANCE.get(w.dtype, 0.0)
        tolerance = f"atol = rtol = {tol:g} ({str(w.dtype).removeprefix('torch.')})"
        if not w.is_floating_point():
            if not torch.equal(w, h):
                return False, None, "exact", f"output {i} differs (integers compare exactly)"
            continue
        diff = (w.double() - h.double()).abs()
        worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
        if not torch.allclose(h, w, atol=tol, rtol=tol, equal_nan=True):
            return False, worst, tolerance, f"output {i} differs by up to {worst:.3g}"
    return True, worst, tolerance, ""


def _ways(
    original: torch.nn.Module, kernelized: torch.nn.Module, inputs: list[Any]
) -> tuple[dict[str, Any], str | None]:
    """The sides to time; the compiled ways are left out (with why) when torch.compile fails."""
    twin = copy.deepcopy(original)
    sides: dict[str, Any] = {
        "eager": lambda xs: original(*xs),
        "kernelized": lambda xs: kernelized(*xs),
        "eager_twin": lambda xs: twin(*xs),
    }
    try:
        compiled, compiled_k = torch.compile(original), torch.compile(kernelized)
        compiled_twin = torch.compile(copy.deepcopy(original))
        want = original(*inputs)
        match, _, _, detail = compare_outputs(want, compiled_k(*inputs))
        compiled(*inputs), compiled_twin(*inputs)
    except Exception as exc:
        return sides, f"{type(exc).__name__}: {first_said(exc)}"
    if not match:
        return sides, f"{_COMPILED_DIFFERS}: {detail}"
    sides.update(
        compiled=lambda xs: compiled(*xs),
        kernelized_compiled=lambda xs: compiled_k(*xs),
        compiled_twin=lambda xs: compiled_twin(*xs),
    )
    return sides, None


def time_four_ways(
    sides: dict[str, Any], inputs: Sequence[torch.Tensor], device: str, rounds: int, cold: bool
) -> FourWay:
    """The ways in ``sides`` (eager, kernelized, eager_twin, and the compiled ones where given)
    timed round by round on copies of ``inputs``, in one cache regime."""

    def draw() -> list[torch.Tensor]:
        return [x.clone() for x in inputs]

    ns = time_sides(sides, draw, rounds, cold, flush_bytes(device), device)

    def median_ms(name: str) -> float | None:
        if name not in ns:
            return None
        xs = sorted(ns[name])
        return round(xs[len(xs) // 2] / 1e6, 5)

    def ratio(base: str, other: str) -> Any:
        return paired_ratio(ns[base], ns[other]) if base in ns and other in ns else None

    return FourWay(
        regime="cold" if cold else "warm",
        rounds=rounds,
        eager_ms=median_ms("eager") or 0.0,
        kernelized_ms=median_ms("kernelized") or 0.0,
        compiled_ms=median_ms("compiled"),
        kernelized_compiled_ms=median_ms("kernelized_compiled"),
        kernelized_vs_eager=ratio("eager", "kernelized"),
        compiled_vs_eager=ratio("eager", "compiled"),
        kernelized_compiled_vs_eager=ratio("eager", "kernelized_compiled"),
        kernelized_compiled_vs_compiled=ratio("compiled", "kernelized_compiled"),
        eager_null=ratio("eager", "eager_twin"),
        compiled_null=ratio("compiled", "compiled_twin"),
    )


def prove_model(loaded: LoadedModel, bank_path: str | None, device: str, rounds: int) -> ModelProof:
    """Kernelize a fresh model with the bank, check it against the original, time the four ways."""
    torch.manual_seed(0)
    original = loaded.build().eval().to(device)
    torch.manual_seed(0)
    kernelized = loaded.build().eval().to(device)
    kernelized.load_state_dict(original.state_dict())
    bank = kb.open(bank_path)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        patched = bank.kernelize(kernelized)
    torch.manual_seed(_FRESH_SEED)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in loaded.inputs()]
    with torch.no_grad():
        with bank.watch() as seen:
            got = kernelized(*inputs)
        match, worst, tolerance, detail = compare_outputs(original(*inputs), got)
        proof = ModelProof(
            kernelized=patched,
            ops=[OpCalls(op=u.op, calls=u.calls, kernel_calls=u.kernel_calls) for u in seen.ops.values()],
            outputs_match=match,
            max_abs_diff=worst,
            tolerance=tolerance,
            detail=detail,
            warnings=sorted({str(w.message) for w in said}),
        )
        if not match:
            return proof
        sides, proof.compile_error = _ways(original, kernelized, inputs)
        if proof.compile_error is not None and proof.compile_error.startswith(_COMPILED_DIFFERS):
            proof.outputs_match, proof.detail = False, proof.compile_error
            return proof
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        if len(tensors) == len(inputs):
            proof.timings = [time_four_ways(sides, tensors, device, rounds, cold) for cold in (False, True)]
        else:
            proof.detail = "not timed: get_inputs() gives values other than tensors (the timing loop refills tensors)"
    return proof
