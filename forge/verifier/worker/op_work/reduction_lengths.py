"""How many input elements stand behind each element of an op's outputs: the length of the
reductions a candidate may sum in another order, found by differentiating the reference.

Elements read over elements written undercounts every op whose outputs reduce along the way: a
cumulative sum writes as many elements as it reads while its last output sums the whole row, an
attention's output is as large as its query while each element sums two whole rows of keys and
values, a square Linear layer reads as many as it writes while each output is a dot product of
its input's width. A candidate summing such an op in another order (in blocks, in float32 where
the reference accumulates in float64) was held to an elementwise tolerance meant for one rounding.

Each output element's gradient with respect to the floating inputs is nonzero exactly where that
element depends on an input (up to a zero derivative met by chance: a ReLU's dead side, a max's
losers — which sum nothing either), so counting it gives the length of what was summed into it.
A few elements are sampled per output (the first, the middle and the last: a forward scan's
longest prefix is its last element, a reverse scan's its first). Runs in the reference's worker
and in the op brief's process, never on the candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from forge.core.module_call import output_tensors
from forge.verifier.worker.call_form import invoke


def _positions(numel: int) -> list[int]:
    return sorted({0, numel // 2, numel - 1})


def _counted(grads: Sequence[torch.Tensor | None]) -> int:
    return sum(int(torch.count_nonzero(g)) for g in grads if g is not None)


def reduction_lengths(model: torch.nn.Module, inputs: Sequence[Any]) -> list[int]:
    """Per output tensor of ``model`` called on ``inputs`` (in ``output_tensors``' order), the
    most floating input elements any sampled element of it depends on; 1 for an output that
    depends on none (an integer output, one computed outside autograd). An empty list where the
    reference cannot be differentiated (an in-place write into a leaf, a custom function without
    a backward): the caller keeps elements read over elements written."""
    # every tensor cloned: a reference that writes into an input (an integer target's ignore
    # index) must not change the case's inputs, which the candidate gets next
    leaves = [gradient_leaf(x) for x in inputs]
    wrt = [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]
    if not wrt:
        return []
    try:
        with torch.enable_grad():
            outs = output_tensors(invoke(model, leaves))
            return [_longest(out, wrt) for out in outs]
    except Exception:  # the user's forward under autograd, whatever it raises: no count, not a failure
        return []


def gradient_leaf(x: Any) -> Any:
    """A copy of an input to differentiate the reference at: a floating tensor's requires grad;
    other values as they are."""
    if not isinstance(x, torch.Tensor):
        return x
    copy = x.detach().clone()
    return copy.requires_grad_(True) if _differentiable(copy) else copy


def _differentiable(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())


def _longest(out: Any, wrt: list[torch.Tensor]) -> int:
    if not (isinstance(out, torch.Tensor) and out.requires_grad and out.numel()):
        return 1
    flat = out.reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat).sum(-1)
    most = 1
    for k in _positions(flat.numel()):
        grads = torch.autograd.grad(flat[k], wrt, retain_graph=True, allow_unused=True)
        most = max(most, _counted(grads))
    return most


__all__ = ["gradient_leaf", "reduction_lengths"]
