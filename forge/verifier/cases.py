"""How test inputs and weights are drawn (run in the reference worker).

Seeds come from the parent at verification time, so nothing a candidate memorised about seed 42
helps. Stress distributions rewrite the floating-point inputs of an ordinary draw; on them the
reference's output, NaN and inf positions included, is the specification.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

STRESS_KINDS = ("large", "heavy_tail", "mixed_sign")


def _gen(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _large(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    # Values in the hundreds: exp() without a max shift overflows, squares lose precision.
    return x * 100.0


def _heavy_tail(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    # A log-normal scale mixture: most values ordinary, a few orders of magnitude larger.
    scale = torch.exp(torch.randn(x.shape, generator=g) * 1.5).to(x.dtype)
    return x * scale.to(x.device)


def _mixed_sign(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    # Random signs times magnitudes spread over six decades: cancellation-prone sums.
    mag = torch.pow(10.0, torch.rand(x.shape, generator=g) * 6 - 3)
    sign = torch.where(torch.rand(x.shape, generator=g) < 0.5, -1.0, 1.0)
    return (sign * mag).to(dtype=x.dtype, device=x.device)


_STRESS: dict[str, Callable[[torch.Tensor, torch.Generator], torch.Tensor]] = {
    "large": _large,
    "heavy_tail": _heavy_tail,
    "mixed_sign": _mixed_sign,
}


def stress_inputs(inputs: list[torch.Tensor], kind: str, seed: int) -> list[torch.Tensor]:
    """Apply one stress distribution to every floating-point input (others are left as drawn)."""
    g = _gen(seed)
    fn = _STRESS[kind]
    return [fn(x, g).contiguous() if x.is_floating_point() else x for x in inputs]


def perturb_parameters(model: torch.nn.Module, seed: int) -> None:
    """A second weight initialisation: every floating parameter moved off its default.

    Defaults such as LayerNorm's weight=1, bias=0 let a kernel that ignores the parameters pass;
    after this each parameter differs from its default by about half its own magnitude.
    """
    g = _gen(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                scale = 0.5 * max(float(p.abs().mean()), 0.1)
                p.add_((torch.randn(p.shape, generator=g) * scale).to(p.dtype).to(p.device))
