"""What a gradient run leaves on the candidate's model: nothing. Every run that differentiates
``ModelNew`` in its worker (a gradient case, its double backward, the custom-op check) takes
fresh leaves and keeps the module's buffers (running statistics a training-mode forward updates)
and its parameters' ``.grad`` as they were, so the next run and the timed steps start from the
state the reference's model is in."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch


def grad_leaves(inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Copies of ``inputs``, the floating ones requiring grad."""
    return [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]


@contextmanager
def state_kept(model: torch.nn.Module) -> Iterator[list[tuple[str, torch.nn.Parameter]]]:
    """Yields the parameters that require grad, their ``.grad`` set to None; afterwards their
    ``.grad`` and the module's buffers are as they were before."""
    params = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    held = {name: p.grad for name, p in params}
    kept = {name: b.detach().clone() for name, b in model.named_buffers()}
    try:
        for _, p in params:
            p.grad = None
        yield params
    finally:
        for name, p in params:
            p.grad = held[name]
        with torch.no_grad():
            for name, value in kept.items():
                model.get_buffer(name).copy_(value)
