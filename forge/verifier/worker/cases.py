"""How test inputs and weights are drawn (run in the reference worker).

Seeds come from the parent at verification time, so nothing a candidate memorised about seed 42
helps. Stress distributions rewrite the floating-point inputs of an ordinary draw; on them the
reference's output, NaN and inf positions included, is the specification.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

STRESS_KINDS = ("large", "heavy_tail", "mixed_sign", "specials")


def _gen(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _large(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    # Values in the hundreds: exp() without a max shift overflows, squares lose precision.
    return x * 100.0


# The generators work in place where they can: on an op with 1 GiB inputs each temporary is
# another GiB of the reference worker's peak.


def _heavy_tail(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    # A log-normal scale mixture: most values ordinary, a few orders of magnitude larger.
    scale = torch.randn(x.shape, generator=g).mul_(1.5).exp_().to(dtype=x.dtype, device=x.device)
    return scale.mul_(x)


def _mixed_sign(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    # Random signs times magnitudes spread over six decades: cancellation-prone sums.
    mag = torch.rand(x.shape, generator=g).mul_(6).sub_(3).mul_(math.log(10.0)).exp_()  # 10 ** U(-3, 3)
    sign = torch.rand(x.shape, generator=g).lt_(0.5).mul_(-2).add_(1)  # -1 where < 0.5, else 1
    return mag.mul_(sign).to(dtype=x.dtype, device=x.device)


def _specials(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    # An ordinary draw with a sparse sprinkle of NaN, +inf and -inf (one element in 4096, at least
    # three). A kernel that loses them (an exp that clamps its argument, a SIMD min/max that drops
    # NaN, a variance whose inf - inf cancels to a finite number) returns numbers where the
    # reference propagates NaN or inf, and the checks downstream that rely on that never fire
    # (mixed-precision loss scaling skips a step when a gradient is inf or NaN).
    n = x.numel()
    if n == 0:
        return x
    k = max(3, n // 4096)
    at = torch.randint(0, n, (k,), generator=g)
    values = torch.tensor([float("nan"), float("inf"), float("-inf")]).repeat(k // 3 + 1)[:k]
    out = x.clone().reshape(-1)
    out[at.to(x.device)] = values.to(dtype=x.dtype, device=x.device)
    return out.reshape(x.shape)


_STRESS: dict[str, Callable[[torch.Tensor, torch.Generator], torch.Tensor]] = {
    "large": _large,
    "heavy_tail": _heavy_tail,
    "mixed_sign": _mixed_sign,
    "specials": _specials,
}


def stress_inputs(
    inputs: list[torch.Tensor], kind: str, seed: int, fixed: frozenset[int] = frozenset()
) -> list[torch.Tensor]:
    """Apply one stress distribution to every floating-point input (others are left as drawn, and
    so are ``fixed`` ones: the op file's ``FORGE_FIXED_INPUTS``, a mask or a rotary table whose
    values are the model's)."""
    g = _gen(seed)
    fn = _STRESS[kind]
    return [fn(x, g).contiguous() if x.is_floating_point() and i not in fixed else x for i, x in enumerate(inputs)]


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
