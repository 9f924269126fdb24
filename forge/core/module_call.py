"""How a module is called and what it returns, as data an op file can hold.

The models people have call their layers with keyword arguments, ``None``, flags, tuples of
tensors (``position_embeddings=(cos, sin)``) and masks, and get back tuples with ``None`` in them,
dicts or ``ModelOutput`` records. A recorded call becomes a *template*: the call's own Python
source with each tensor replaced by a placeholder (``x0, attention_mask=None,
position_embeddings=(x1, x2)``), so a carved op's ``forge_call`` makes exactly the call the model
made. A value that cannot be written down is a refusal that says why; a KV-cache object is one
(it carries state from call to call).

An output is judged by its tensors in a fixed order (``output_tensors``) and its *layout*, the
shape of the structure around them (``output_layout``): a candidate must return the reference's
layout, where tuples, lists and named tuples read alike.
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import _pytree as pytree

_PLAIN = (bool, int, str, type(None))


def python_literal(value: Any) -> str:
    """``value`` as Python source an op file can hold; raises TypeError for anything else. Only
    the plain types themselves: an enum's repr (``<Mode.A: 1>``) or numpy's (``np.float64(0.5)``)
    would not read back."""
    if type(value) in _PLAIN:
        return repr(value)
    if type(value) is float:
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if type(value) is torch.Size:
        return f"torch.Size({list(value)!r})"
    if type(value) in (tuple, list):
        parts = [python_literal(v) for v in value]
        if isinstance(value, list):
            return "[" + ", ".join(parts) + "]"
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    raise TypeError(type(value).__name__)


class CallRefused(Exception):
    """The call holds a value an op file cannot reproduce; the message says which and why."""


@dataclass
class CallTemplate:
    """One call, its tensors as placeholders ``x0``, ``x1``, ... (a tensor passed twice is one)."""

    source: str  # the argument list, as Python source
    tensors: list[torch.Tensor] = field(default_factory=list)


def _is_cache(value: Any) -> bool:
    """A KV cache (transformers' ``Cache`` and its kin): state carried from one call to the next."""
    return any(c.__name__.endswith("Cache") for c in type(value).__mro__)


class _Writer:
    def __init__(self, given: Sequence[torch.Tensor] | None = None) -> None:
        self.tensors: list[torch.Tensor] = list(given or [])
        self._slots: dict[int, int] = {id(t): i for i, t in enumerate(self.tensors)}
        self._closed = given is not None  # only the given tensors may appear

    def write(self, value: Any, where: str) -> str:
        if isinstance(value, torch.Tensor):
            if self._closed and id(value) not in self._slots:
                raise CallRefused(f"its argument {where} is a tensor that is none of the op's inputs")
            slot = self._slots.setdefault(id(value), len(self.tensors))
            if slot == len(self.tensors):
                self.tensors.append(value)
            return f"x{slot}"
        if type(value) in (tuple, list):  # a named tuple is an object of its own: refused below
            parts = [self.write(v, f"{where}[{i}]") for i, v in enumerate(value)]
            if isinstance(value, list):
                return "[" + ", ".join(parts) + "]"
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        if type(value) is dict and all(isinstance(k, str) for k in value):
            return "{" + ", ".join(f"{k!r}: {self.write(v, f'{where}[{k!r}]')}" for k, v in value.items()) + "}"
        if _is_cache(value):
            raise CallRefused(
                f"its argument {where} is a {type(value).__name__}, which carries state from call to call "
                "(a KV cache): run the model without one (use_cache=False, or past_key_values=None)"
            )
        try:
            return python_literal(value)
        except TypeError:
            raise CallRefused(
                f"its argument {where} is a {type(value).__name__}, which an op file cannot hold"
            ) from None


def _written(writer: _Writer, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    parts = [writer.write(a, f"{i}") for i, a in enumerate(args)]
    return ", ".join(parts + [f"{k}={writer.write(v, repr(k))}" for k, v in kwargs.items()])


def call_template(args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallTemplate:
    """The call ``module(*args, **kwargs)`` as a template; raises CallRefused."""
    writer = _Writer()
    source = _written(writer, args, kwargs)
    if not writer.tensors:
        raise CallRefused("it is called without a tensor argument")
    return CallTemplate(source, writer.tensors)


def recorded_call(call: Callable[..., Any], model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> str:
    """The template of the call ``call(model, *inputs)`` makes (an op file's ``forge_call``), its
    placeholders the places of ``inputs`` (``x1`` is ``inputs[1]``); raises CallRefused."""
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def hook(_module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen.append((args, kwargs))

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad():
            call(model, *inputs)
    finally:
        handle.remove()
    if len(seen) != 1:
        raise CallRefused(f"the op's call calls the model {len(seen)} times")
    args, kwargs = seen[0]
    return _written(_Writer(inputs), args, kwargs)


@functools.lru_cache(maxsize=64)
def _parsed(template: str) -> ast.Call:
    node = ast.parse(f"f({template})", mode="eval").body
    assert isinstance(node, ast.Call)
    return node


def _value(node: ast.expr) -> Any:
    """A template's literal as the value it writes (``python_literal``'s forms)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return getattr(torch, node.attr)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float":
        return float(ast.literal_eval(node.args[0]))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "device":
        return torch.device(ast.literal_eval(node.args[0]))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Size":
        return torch.Size(ast.literal_eval(node.args[0]))
    return ast.literal_eval(node)


def _placeholder(node: ast.expr) -> int | None:
    if isinstance(node, ast.Name) and node.id.startswith("x") and node.id[1:].isdigit():
        return int(node.id[1:])
    return None


# A template's argument as a pattern, made once per template: a kernel checks every call it gets
# against it (reading the literals again on each call took 17 us)
_Pattern = tuple[Any, ...]  # ("tensor", slot) | ("value", v) | ("seq", type, patterns) | ("dict", keys, patterns)


def _pattern(node: ast.expr) -> _Pattern:
    slot = _placeholder(node)
    if slot is not None:
        return ("tensor", slot)
    if isinstance(node, ast.Tuple | ast.List):
        return ("seq", tuple if isinstance(node, ast.Tuple) else list, tuple(_pattern(n) for n in node.elts))
    if isinstance(node, ast.Dict):
        keys = [_value(k) for k in node.keys if k is not None]
        return ("dict", keys, tuple(_pattern(n) for n in node.values))
    return ("value", _value(node))


@functools.lru_cache(maxsize=64)
def _patterns(template: str) -> tuple[tuple[_Pattern, ...], tuple[tuple[str, _Pattern], ...]]:
    call = _parsed(template)
    return tuple(_pattern(n) for n in call.args), tuple((str(k.arg), _pattern(k.value)) for k in call.keywords)


def _match(pattern: _Pattern, value: Any, found: dict[int, torch.Tensor]) -> bool:
    kind = pattern[0]
    if kind == "tensor":
        return isinstance(value, torch.Tensor) and found.setdefault(pattern[1], value) is value
    if kind == "value":
        wanted = pattern[1]
        if isinstance(value, torch.Tensor) or type(value) is not type(wanted):
            return False
        if isinstance(wanted, float) and math.isnan(wanted):
            return math.isnan(value)
        return bool(value == wanted)
    if kind == "seq":
        parts = pattern[2]
        return (
            type(value) is pattern[1]
            and len(value) == len(parts)
            and all(_match(p, v, found) for p, v in zip(parts, value, strict=True))
        )
    keys = pattern[1]
    return (
        isinstance(value, dict)
        and list(value) == keys
        and all(_match(p, value[k], found) for k, p in zip(keys, pattern[2], strict=True))
    )


def match_call(template: str, args: Sequence[Any], kwargs: dict[str, Any]) -> list[torch.Tensor] | None:
    """The tensors ``x0``, ``x1``, ... of a call made as ``template`` says (the same keywords, the
    same values where it writes values), or None for any other call."""
    positional, keywords = _patterns(template)
    if len(args) != len(positional) or len(kwargs) != len(keywords):
        return None
    found: dict[int, torch.Tensor] = {}
    for pattern, value in zip(positional, args, strict=True):
        if not _match(pattern, value, found):
            return None
    for name, pattern in keywords:
        if name not in kwargs or not _match(pattern, kwargs[name], found):
            return None
    if len(found) != max(found, default=-1) + 1:
        return None
    return [found[i] for i in range(len(found))]


def _built(node: ast.expr, tensors: Sequence[torch.Tensor]) -> Any:
    slot = _placeholder(node)
    if slot is not None:
        return tensors[slot]
    if isinstance(node, ast.Tuple):
        return tuple(_built(n, tensors) for n in node.elts)
    if isinstance(node, ast.List):
        return [_built(n, tensors) for n in node.elts]
    if isinstance(node, ast.Dict):
        return {_value(k): _built(v, tensors) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    return _value(node)


def call_arguments(template: str, tensors: Sequence[torch.Tensor]) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments of the call ``template`` writes, on ``tensors``."""
    call = _parsed(template)
    return [_built(n, tensors) for n in call.args], {str(k.arg): _built(k.value, tensors) for k in call.keywords}


def rebuild_output(layout: str, tensors: Sequence[Any]) -> Any:
    """``tensors`` (``output_tensors``'s order) put back in the structure ``layout`` describes
    (dicts as plain dicts)."""
    # "(tensor)" is a one-item tuple: a trailing comma in every tuple makes it one in Python too
    expression = layout.replace(")", ",)").replace("(,)", "()")
    return _rebuilt(ast.parse(expression, mode="eval").body, iter(tensors))


def _rebuilt(node: ast.expr, values: Any) -> Any:
    if isinstance(node, ast.Name) and node.id == "tensor":
        return next(values)
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, ast.Tuple):
        return tuple(_rebuilt(n, values) for n in node.elts)
    if isinstance(node, ast.Dict):
        return {
            (k.id if isinstance(k, ast.Name) else str(ast.literal_eval(k))): _rebuilt(v, values)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    raise ValueError(f"an output layout forge cannot rebuild: {ast.unparse(node)}")


def output_tensors(out: Any) -> list[Any]:
    """A forward's result as the list of its values in a fixed order: a tuple's, list's, dict's or
    ``ModelOutput``'s items, nested ones flattened, ``None`` left out; or the one value."""
    return [v for v in pytree.tree_leaves(out) if v is not None]


def _layout(node: Any) -> str:
    if isinstance(node, torch.Tensor):
        return "tensor"
    if node is None:
        return "None"
    # a container of another type than a plain tuple, list or dict is named: a ModelOutput, a named
    # tuple or torch.return_types record is read by its fields, and a subclass may flatten itself
    # differently (in the timed loop, its flattening would run after the clock stopped)
    named = "" if type(node) in (tuple, list, dict) else f"{type(node).__module__}.{type(node).__qualname__}"
    if isinstance(node, tuple | list):
        return named + "(" + ", ".join(_layout(v) for v in node) + ")"
    if isinstance(node, dict):  # a ModelOutput is a dict holding its fields that are not None
        return named + "{" + ", ".join(f"{k}: {_layout(v)}" for k, v in node.items()) + "}"
    return type(node).__name__


def output_layout(out: Any) -> str:
    """The structure around a forward's values: ``tensor``, ``(tensor, None)``, ``{logits: tensor}``,
    a container's type named where it is not a plain tuple, list or dict
    (``transformers.modeling_outputs.BaseModelOutput{last_hidden_state: tensor}``)."""
    return _layout(out)


def rebuildable(layout: str) -> bool:
    """``rebuild_output`` can make this structure: tensors, None, plain tuples and dicts."""
    try:
        rebuild_output(layout, [None] * layout.count("tensor"))
    except (ValueError, SyntaxError, StopIteration):
        return False
    return True


def layout_refusal(out: Any) -> str | None:
    """Why a forward's result cannot be compared (None: it can): every value must be a tensor."""
    others = sorted({type(v).__name__ for v in output_tensors(out) if not isinstance(v, torch.Tensor)})
    if others:
        return f"it returns {', '.join(others)} values beside its tensors ({output_layout(out)})"
    if not output_tensors(out):
        return f"it returns no tensor ({output_layout(out)})"
    return None


__all__ = [
    "CallRefused",
    "CallTemplate",
    "call_arguments",
    "call_template",
    "layout_refusal",
    "match_call",
    "output_layout",
    "output_tensors",
    "python_literal",
    "rebuild_output",
    "rebuildable",
    "recorded_call",
]
