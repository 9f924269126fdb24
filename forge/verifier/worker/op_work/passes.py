"""The second pass an op's math forces: data read again after a reduction over it.

A normalization by a whole-tensor norm (``x / x.norm()``) needs the norm before any output
element, so a kernel reads ``x`` twice, unless what one reduction covers (its *group*: the whole
tensor here, a row for a LayerNorm) stays in a cache between the two reads; of a group larger
than the cache, the part the cache keeps is read from it (the second pass walking backward), the
rest from memory again. A bound that counts one read is then unreachable by construction.
``RereadTracer`` follows one call of the op through aten and finds, per tensor the op reads (an
input or the module's state), the largest group of a reduction over it whose result is used
together with that tensor again; ``record`` in ``roofline`` counts the second read of what the
cache the bound prices cannot keep of each group.

The count is a lower bound: a tensor is read again at most once, however many reductions need it
(a mean and a variance fold into one pass), and a group is the tensor's bytes over the reduction's
outputs (a reduction along a middle dimension holds more than that between its reads).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakTensorKeyDictionary

aten = torch.ops.aten

# reductions whose result a later op can use beside the data they reduced
_REDUCTIONS = frozenset(
    getattr(aten, name)
    for name in (
        "sum", "mean", "amax", "amin", "max", "min", "norm", "linalg_vector_norm", "var", "std", "var_mean",
        "std_mean", "prod", "logsumexp", "argmax", "argmin", "any", "all", "nansum", "aminmax",
    )
    if hasattr(aten, name)
)  # fmt: skip
# aten ops that make two passes over their first argument themselves: the statistic, then the output
_TWO_PASS = frozenset(
    getattr(aten, name)
    for name in ("_softmax", "_log_softmax", "native_layer_norm", "native_group_norm")
    if hasattr(aten, name)
)


def _two_pass_groups(packet: Any, args: Any) -> int:
    """The groups a ``_TWO_PASS`` op reduces its first argument in."""
    x = args[0]
    if packet in (aten._softmax, aten._log_softmax):
        return int(x.numel() // max(x.shape[int(args[1])], 1)) if x.dim() else 1
    if packet is aten.native_layer_norm:
        return int(x.numel() // max(math.prod(int(s) for s in args[1]), 1))
    if packet is aten.native_group_norm:
        return int(args[3]) * int(args[6])
    raise TypeError(packet)


@dataclass(frozen=True)
class Reread:
    """A tensor the op reads (``bytes`` of it) that its math needs again after a reduction over
    groups of ``group_bytes`` of it: read twice where a group does not stay in cache between."""

    bytes: int
    group_bytes: int


@dataclass(frozen=True)
class _Reduction:
    sources: frozenset[int]
    groups: int  # the groups it reduces its input in (a plain reduction: its output's elements)


@dataclass(frozen=True)
class _Deps:
    direct: frozenset[int] = frozenset()  # sources reached through no reduction
    reductions: frozenset[int] = frozenset()  # reductions this value depends on

    def sources(self, reductions: list[_Reduction]) -> frozenset[int]:
        found = set(self.direct)
        for r in self.reductions:
            found |= reductions[r].sources
        return frozenset(found)


class RereadTracer(TorchDispatchMode):
    """Follows which of the tensors the op reads (``add_sources``, by their storage) each value
    depends on, directly or through a reduction, over the aten calls made under it."""

    def __init__(self) -> None:
        super().__init__()
        self.source_bytes: dict[int, int] = {}  # storage pointer -> bytes read
        self.reductions: list[_Reduction] = []
        self.groups: dict[int, int] = {}  # storage pointer -> the largest group read again
        self._deps: WeakTensorKeyDictionary = WeakTensorKeyDictionary()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # nothing is compiled under it (see ``roofline.FlopCounter``)

    def add_sources(self, tensors: list[Any]) -> None:
        """Counts ``tensors`` (the op's inputs and state) as read by the op."""
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.numel():
                key = _storage(t)
                self.source_bytes[key] = max(self.source_bytes.get(key, 0), t.numel() * t.element_size())

    def _deps_of(self, t: torch.Tensor) -> _Deps:
        found: _Deps | None = self._deps.get(t)
        if found is not None:
            return found
        key = _storage(t)
        return _Deps(direct=frozenset({key})) if key in self.source_bytes else _Deps()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        with contextlib.suppress(RuntimeError, TypeError, AttributeError):
            self._follow(func, args, list(tree_leaves((args, kwargs or {}))), out)
        return out

    def _follow(self, func: Any, args: Any, leaves: list[Any], out: Any) -> None:
        ins = [self._deps_of(t) for t in leaves if isinstance(t, torch.Tensor)]
        results = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if not ins or not results:
            return
        direct = frozenset().union(*(d.direct for d in ins))
        through = frozenset().union(*(d.reductions for d in ins))
        for r in through:  # a reduction's result used beside data it reduced: that data read again
            for key in self.reductions[r].sources & direct:
                self._read_again(key, self.reductions[r].groups)
        packet = getattr(func, "overloadpacket", None)
        groups = None
        if packet in _TWO_PASS:  # its own statistic, then its output: its input read twice
            groups = _two_pass_groups(packet, args)
            for key in ins[0].direct:
                self._read_again(key, groups)
        elif packet in _REDUCTIONS:
            groups = results[0].numel()
        if groups is None:
            deps = _Deps(direct, through)
        else:
            self.reductions.append(_Reduction(frozenset().union(*(d.sources(self.reductions) for d in ins)), groups))
            deps = _Deps(reductions=through | {len(self.reductions) - 1})
        for t in results:
            self._deps[t] = deps

    def _read_again(self, key: int, groups: int) -> None:
        group = self.source_bytes[key] // max(groups, 1)
        self.groups[key] = max(self.groups.get(key, 0), group)

    def rereads(self) -> tuple[Reread, ...]:
        """The tensors read again, largest first."""
        found = (Reread(self.source_bytes[k], g) for k, g in self.groups.items() if g > 0)
        return tuple(sorted(found, key=lambda r: (-r.bytes, -r.group_bytes)))


def _storage(t: torch.Tensor) -> int:
    return int(t.untyped_storage().data_ptr())


def reread_bytes(rereads: tuple[Reread, ...], held: int | None) -> tuple[int, int]:
    """(bytes read a second time, the largest group that forces it) where a cache keeps at most
    ``held`` bytes between a reduction's two reads (None: unknown, nothing counted). Of each
    group, what the cache keeps is read again from it (a second pass that walks the group backward
    finds its last ``held`` bytes there), so only the rest counts: a lower bound."""
    if held is None:
        return 0, 0
    over = [r for r in rereads if r.group_bytes > held]
    again = sum((r.group_bytes - held) * (r.bytes // r.group_bytes) for r in over)
    return again, max((r.group_bytes for r in over), default=0)
