"""The matmul work an op cannot avoid: a causal attention computes every score and then masks half
of them away, and multiplies the masked half's zero weights into the values. Counting that work
puts the bound at half the time a kernel needs, and a kernel that skips the masked blocks (as
every fused attention does) ran at 140-155% of a bound that could not hold.

Work is left out only where no input could need it: a score element no output depends on (its
gradient is zero) and an operand element that is exactly zero, each in the same places on two
draws of the inputs. A mask built from the shapes is the same on every draw; a ReLU's dead side,
a max's losers or a zero met by chance move with the data, and a kernel must compute them to
know, so they stay counted. Runs in the reference's worker, while the candidate runs its
correctness cases; never on the candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from forge.core.module_call import output_tensors
from forge.verifier.worker.call_form import invoke
from forge.verifier.worker.op_work.reduction_lengths import gradient_leaf

aten = torch.ops.aten

# where a matmul's two operands sit among its arguments
_OPERANDS: dict[Any, tuple[int, int]] = {aten.mm: (0, 1), aten.bmm: (0, 1), aten.addmm: (1, 2), aten.baddbmm: (1, 2)}
# two draws agree on where the unneeded elements are when their common ones are this share of either's
_AGREE = 0.99


@dataclass
class _Product:
    """One matmul call of the reference: its output and its two operands."""

    out: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor


class _MatmulRecorder(TorchDispatchMode):
    """Keeps each matmul's output and operands (below autograd: the output it records is the one
    autograd then attaches its history to)."""

    def __init__(self) -> None:
        super().__init__()
        self.products: list[_Product] = []

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # nothing is compiled under it (see roofline.FlopCounter)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        where = _OPERANDS.get(getattr(func, "overloadpacket", None))
        if where is not None and isinstance(out, torch.Tensor) and out.is_floating_point():
            self.products.append(_Product(out, args[where[0]].detach(), args[where[1]].detach()))
        return out


@dataclass
class _Use:
    """Of one matmul on one draw: which output elements an output depends on, which operand
    elements are not zero."""

    live: torch.Tensor
    a_nonzero: torch.Tensor
    b_nonzero: torch.Tensor


def _uses(model: torch.nn.Module, inputs: Sequence[Any]) -> list[_Use] | None:
    """Each matmul's ``_Use`` on one draw; None where the reference cannot be differentiated."""
    recorder = _MatmulRecorder()
    leaves = [gradient_leaf(x) for x in inputs]  # copies: the case's inputs stay as they were
    try:
        with torch.enable_grad():
            with recorder:
                outs = [o for o in output_tensors(invoke(model, leaves)) if o.requires_grad]
            products = [p for p in recorder.products if p.out.requires_grad]
            if not outs or len(products) != len(recorder.products):
                return None  # a matmul outside autograd: whether an output needs it is not known
            seeds = [torch.randn_like(o) for o in outs]
            grads = torch.autograd.grad(outs, [p.out for p in products], seeds, allow_unused=True)
    except Exception:  # the user's forward under autograd, whatever it raises: every MAC counted
        return None
    return [
        _Use(
            torch.zeros_like(p.out, dtype=torch.bool) if g is None else g != 0,
            p.a != 0,
            p.b != 0,
        )
        for p, g in zip(products, grads, strict=True)
    ]


def _settled(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Where an element is needed (True) given two draws' masks of it: unneeded only where both
    draws agree it is unneeded, and only when the two draws' unneeded places are the same ones."""
    off_both = int((~first & ~second).sum())
    off_either = int((~first | ~second).sum())
    if off_either == 0 or off_both < _AGREE * off_either:
        return torch.ones_like(first)
    return first | second


def _macs(use: _Use) -> int:
    """Multiply-adds of needed output elements whose two factors are both not always zero."""
    # float32 counts each element's k exactly below 2**24; the total is summed in float64
    pairs = torch.matmul(use.a_nonzero.to(torch.float32), use.b_nonzero.to(torch.float32))
    return int((pairs * use.live.reshape(pairs.shape)).sum(dtype=torch.float64))


def _all_macs(use: _Use) -> int:
    return use.live.numel() * int(use.a_nonzero.shape[-1])


def unneeded_flops(model: torch.nn.Module, draws: Sequence[Sequence[Any]], counted: int) -> int:
    """FLOPs (2 per MAC) of the reference's matmuls that no output needs, from two draws of its
    inputs; 0 where it cannot be told (the reference not differentiable, the draws calling
    different matmuls, or differentiating it calling others than the ``counted`` FLOPs of a call
    without gradients: a scaled_dot_product_attention with a float mask runs fused without them
    and as two bmm with them, and its masked pairs were already left out): every MAC stays counted."""
    if len(draws) != 2:
        raise ValueError("unneeded_flops compares two draws of the inputs")
    first, second = (_uses(model, d) for d in draws)
    if first is None or second is None or len(first) != len(second):
        return 0
    if 2 * sum(_all_macs(u) for u in first) != counted:
        return 0
    pairs = list(zip(first, second, strict=True))
    if any(u.live.shape != v.live.shape or u.a_nonzero.shape != v.a_nonzero.shape for u, v in pairs):
        return 0
    skipped = 0
    with torch.no_grad():
        for u, v in pairs:
            settled = _Use(
                _settled(u.live, v.live), _settled(u.a_nonzero, v.a_nonzero), _settled(u.b_nonzero, v.b_nonzero)
            )
            skipped += 2 * (_all_macs(settled) - _macs(settled))
    return skipped


__all__ = ["unneeded_flops"]
