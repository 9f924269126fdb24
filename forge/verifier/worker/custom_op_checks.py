"""``torch.library.opcheck`` on the custom ops a candidate defines, in the candidate's worker.

A candidate may write its kernel as a ``torch.library.custom_op`` (with ``register_autograd`` for
its backward, ``register_fake`` so that torch.compile can trace it). The gradient cases compare
its values; what they cannot see is an op whose registration is wrong in ways that show up
elsewhere: a schema that says it does not mutate an input it writes, a fake implementation that
gives other shapes or strides than the kernel (torch.compile then miscompiles the user's model),
an autograd formula registered the wrong way. ``opcheck`` tests exactly those, on the arguments
the candidate's own forward passed to the op in a gradient case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import torch
from torch._library.custom_ops import CustomOpDef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from forge.core.errors import first_said
from forge.core.module_call import output_tensors
from forge.verifier.worker.call_form import invoke
from forge.verifier.worker.model_state import grad_leaves, state_kept


@dataclass(frozen=True)
class CustomOpReport:
    """The custom ops a candidate defines and its forward called, and the first opcheck failure."""

    checked: list[str]
    failure: str | None = None


def custom_ops(module: ModuleType) -> dict[str, CustomOpDef]:
    """The ``torch.library.custom_op`` definitions at the top level of the candidate's module, by
    qualified name (``ns::name``)."""
    return {v._qualname: v for v in vars(module).values() if isinstance(v, CustomOpDef)}


class _FirstCalls(TorchDispatchMode):
    """Records the first call of each op named in ``wanted``: its overload and copied arguments."""

    def __init__(self, wanted: dict[str, CustomOpDef]) -> None:
        super().__init__()
        self.wanted = wanted
        self.calls: dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = func._schema.name
        if name in self.wanted and name not in self.calls:
            # an op with an autograd formula of its own gets it tested (the arguments keep
            # requires_grad); one differentiated by an autograd.Function around it has none to test
            graded = self.wanted[name]._backward_fn is not None
            copy = partial(_copied, graded=graded)
            self.calls[name] = (func, tree_map(copy, tuple(args)), tree_map(copy, dict(kwargs)))
        return func(*args, **kwargs)


def _copied(value: Any, graded: bool) -> Any:
    # copied before the op runs: an op that writes its arguments is checked on what it was given
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(graded and value.requires_grad)
    return value


def check_custom_ops(module: ModuleType, model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> CustomOpReport:
    """Runs ``model`` forward on copies of ``inputs`` (floating ones requiring grad), records the
    arguments of each custom op of ``module`` it calls, and runs ``torch.library.opcheck`` on each:
    its schema, its autograd registration, its fake implementation, and its trace through
    AOTAutograd."""
    defined = custom_ops(module)
    if not defined:
        return CustomOpReport([])
    recorder = _FirstCalls(defined)
    with state_kept(model), torch.enable_grad(), recorder:
        output_tensors(invoke(model, grad_leaves(inputs)))
    for name, (overload, args, kwargs) in recorder.calls.items():
        try:
            torch.library.opcheck(overload, args, kwargs)
        except Exception as exc:  # opcheck raises OpCheckError naming the test that failed
            said = first_said(exc, 400) or type(exc).__name__
            return CustomOpReport(sorted(recorder.calls), f"custom op {name}: torch.library.opcheck: {said}")
    return CustomOpReport(sorted(recorder.calls))
