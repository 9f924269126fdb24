"""How this worker calls the op's model: through the op file's ``forge_call(model, *inputs)``
where it defines one (keyword arguments, ``None``, tuples of tensors, as a model calls its
layers), else ``model(*inputs)``. A worker verifies one op at a time; its set-up names the op's
module (``use_op``), and every call of a reference, a compiled baseline or a candidate goes
through ``invoke``, so that all of them see the same call."""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

_call: Callable[..., Any] | None = None


def use_op(module: types.ModuleType | None) -> None:
    """Call models the way ``module`` (the op file) says from now on in this process."""
    global _call
    how = getattr(module, "forge_call", None) if module is not None else None
    _call = how if callable(how) else None


def invoke(model: Any, inputs: Sequence[Any]) -> Any:
    """``model`` called on ``inputs`` as the op file says."""
    return _call(model, *inputs) if _call is not None else model(*inputs)


__all__ = ["invoke", "use_op"]
