"""The source an LLM needs to rewrite a class an op file imports (a carved transformers or timm
layer): the class, and the functions and classes of its own module that its methods call
(``apply_rotary_pos_emb``, ``repeat_kv``, an attention function), one level further through
those. Without it the coder sees ``from transformers... import LlamaAttention as Model`` and
nothing of what it must match."""

from __future__ import annotations

import inspect
import types
from typing import Any

SOURCE_LIMIT = 24_000  # characters: a decoder layer's class and helpers fit, a whole file does not


def _names_used(obj: Any) -> list[str]:
    """The global names the code of ``obj`` (a function, or a class's methods) refers to."""
    codes: list[types.CodeType] = []
    functions = [obj] if inspect.isfunction(obj) else [v for v in vars(obj).values() if inspect.isfunction(v)]
    # a decorated method (transformers wraps forward in its deprecation and output wrappers) is
    # read through to the function it wraps
    unwrapped = [inspect.unwrap(f) for f in functions]
    codes += [code for f in unwrapped if isinstance(code := getattr(f, "__code__", None), types.CodeType)]
    found: list[str] = []
    while codes:
        code = codes.pop()
        found += [n for n in code.co_names if n not in found]
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return found


def _helpers(cls: type, depth: int = 2) -> list[Any]:
    """Functions and classes of ``cls``'s module that its methods call, ``depth`` levels deep."""
    module = inspect.getmodule(cls)
    if module is None:
        return []
    found: list[Any] = []
    frontier: list[Any] = [cls]
    for _ in range(depth):
        nxt = []
        for obj in frontier:
            for name in _names_used(obj):
                value = getattr(module, name, None)
                own = getattr(value, "__module__", None) == module.__name__
                callable_here = inspect.isfunction(value) or inspect.isclass(value)
                if own and callable_here and value is not cls and value not in found:
                    found.append(value)
                    nxt.append(value)
        frontier = nxt
    return found


def imported_source(cls: type, limit: int = SOURCE_LIMIT) -> tuple[str, bool]:
    """The class's source and its module's helpers it calls (as one text), and whether it was cut
    at ``limit`` characters; ("", False) where Python has no source for it."""
    try:
        parts = [inspect.getsource(cls)]
    except (OSError, TypeError):
        return "", False
    for helper in _helpers(cls):
        try:
            parts.append(inspect.getsource(helper))
        except (OSError, TypeError):
            continue
    text = "\n\n".join(p.rstrip() for p in parts)
    return (text[:limit], True) if len(text) > limit else (text, False)


__all__ = ["SOURCE_LIMIT", "imported_source"]
