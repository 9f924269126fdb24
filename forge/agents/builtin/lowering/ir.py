"""The lowering's IR: graph values as typed C++ expressions over index tuples.

A value of the traced graph is a tensor with a static shape and dtype. Inside a kernel it is read
at an index tuple (one C++ integer expression per dimension):

- a *buffer* (a graph input, a reduction's or kept op's result, an output) is a load at the
  tuple's row-major offset;
- a *view* maps its index tuple to its source's (broadcast, squeeze, split/collapse, transpose,
  flip, reshape, as_strided of the storage of a contiguous value): no data moves;
- a *pointwise* node is an expression over its operands read at the same tuple.

This module holds that algebra; ``cpp_emit`` builds kernels from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.trace import NodeKind, kind_of, packet_name
from forge.agents.builtin.ops import OPS, NoForm, Operands

CTYPES: dict[torch.dtype, str] = {
    torch.float32: "float",
    torch.float64: "double",
    torch.int64: "int64_t",
    torch.int32: "int32_t",
    torch.int16: "int16_t",
    torch.int8: "int8_t",
    torch.uint8: "uint8_t",
    torch.bool: "bool",
}


class Unsupported(Exception):
    """A node the lowering cannot express; the message names it and why."""


def value_of(node: Any) -> Any:
    """The fake tensor make_fx recorded for a node (its shape, dtype, strides)."""
    return node.meta.get("val") if isinstance(node, fx.Node) else None


def shape_of(node: fx.Node) -> tuple[int, ...]:
    val = value_of(node)
    if not isinstance(val, torch.Tensor):
        raise Unsupported(f"{packet_name(node)}: not a tensor value")
    return tuple(int(d) for d in val.shape)


def ctype_of(dtype: torch.dtype, where: str = "") -> str:
    if dtype not in CTYPES:
        raise Unsupported(f"{where}: dtype {dtype} is not one the lowering emits".lstrip(": "))
    return CTYPES[dtype]


def dtype_of(node: fx.Node) -> torch.dtype:
    val = value_of(node)
    if not isinstance(val, torch.Tensor):
        raise Unsupported(f"{packet_name(node)}: not a tensor value")
    return val.dtype


def operand_dtype(node: fx.Node) -> torch.dtype:
    """The dtype a node's operands have (its first tensor operand's): the one a comparison
    compares in, and the one ``signbit`` reads the sign of."""
    for a in node.args[:2]:
        if isinstance(a, fx.Node):
            return dtype_of(a)
    raise Unsupported(f"{packet_name(node)}: no tensor operand")


def pointwise_value(node: fx.Node, ops: list[str], form: Callable[[Operands], str] | None, missing: str) -> str:
    """Pointwise ``node`` over its operands' text ``ops``, written by its ``form`` in a kernel
    language (None: the language has none, refused saying ``missing``); a float-only op is refused
    on integers, and a form's own refusal (``NoForm``) names the node."""
    name, dtype = packet_name(node), dtype_of(node)
    if form is None:
        raise Unsupported(f"{name}: {missing}")
    if OPS[name].floats_only and not is_float(dtype):
        raise Unsupported(f"{name}: on {dtype}")
    # the second argument where it is a number: pow's form depends on the exponent
    number = node.args[1] if len(node.args) > 1 and not isinstance(node.args[1], fx.Node) else None
    a, b, c = (*ops, "", "", "")[:3]
    try:
        return form(Operands(a, b, c, dtype, number, lambda: operand_dtype(node)))
    except NoForm as exc:
        raise Unsupported(f"{name}: {exc}") from None


def int_arg(node: fx.Node, k: int) -> int:
    """Argument ``k`` of ``node``, which must be an integer (a dim, a getitem's index)."""
    value = node.args[k]
    if isinstance(value, bool) or not isinstance(value, int):
        raise Unsupported(f"{packet_name(node)}: argument {k} is {value!r}, not an integer")
    return value


def int_list(node: fx.Node, k: int) -> list[int]:
    """Argument ``k`` of ``node`` as a list of integers (dims given as an int or a list)."""
    value = node.args[k]
    values = list(value) if isinstance(value, list | tuple) else [value]
    out = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if len(out) != len(values):
        raise Unsupported(f"{packet_name(node)}: argument {k} is {value!r}, not integers")
    return out


def is_float(dtype: torch.dtype) -> bool:
    return dtype in (torch.float32, torch.float64)


def literal(value: Any, dtype: torch.dtype) -> str:
    """A Python scalar as a C++ literal of ``dtype``."""
    if dtype == torch.bool:
        return "true" if value else "false"
    if is_float(dtype):
        v = float(value)
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "(-INFINITY)"
        text = repr(v)
        return f"{text}f" if dtype == torch.float32 else text
    if isinstance(value, float) and not value.is_integer():
        raise Unsupported(f"the scalar {value} cannot be an integer literal")
    return f"(({CTYPES[dtype]}){int(value)}LL)"


# ---- index tuples --------------------------------------------------------------------------------


def _mul(e: str, k: int) -> str:
    if k == 0 or e == "0":
        return "0"
    return e if k == 1 else f"{e} * {k}"


def linear(idx: Sequence[str], shape: Sequence[int]) -> str:
    """The row-major offset of ``idx`` in a contiguous tensor of ``shape``."""
    terms, stride = [], 1
    for e, d in zip(reversed(idx), reversed(shape), strict=True):
        if d != 1:
            term = _mul(e, stride)
            if term != "0":
                terms.append(term)
        stride *= d
    return " + ".join(reversed(terms)) or "0"


def clamp_index(e: str, low: int | None, high: int | None, at_least: str, at_most: str) -> str:
    """Index ``e`` kept within [low, high] by a language's max and min functions (None: no bound)."""
    if low is not None:
        e = f"{at_least}({e}, {low})"
    return f"{at_most}({e}, {high})" if high is not None else e


def delinear(offset: str, shape: Sequence[int]) -> list[str]:
    """The index tuple of a row-major ``offset`` into ``shape``."""
    out, stride = [], 1
    strides = []
    for d in reversed(shape):
        strides.append(stride)
        stride *= d
    strides.reverse()
    total = stride
    for d, s in zip(shape, strides, strict=True):
        if d == 1:
            out.append("0")
            continue
        q = f"({offset})" if s == 1 else f"(({offset}) / {s})"
        out.append(q if s * d == total else f"({q} % {d})")
    return out


# Views whose source, read in row-major order, gives the view's elements in row-major order: a
# row-major offset into the view is the same offset into its source (see ``keeps_order``).
ORDER_KEEPING = frozenset(
    {
        "prims.squeeze",
        "prims.split_dim",
        "prims.collapse_view",
        "prims.reshape",
        "prims.view_of",
        "aten.view",
        "aten.reshape",
        "aten._unsafe_view",
        "aten.alias",
        "aten.lift_fresh_copy",
    }
)


def keeps_order(node: fx.Node) -> bool:
    """Whether a view's row-major offsets are its source's (so a load needs no div/mod)."""
    name = packet_name(node)
    if name in ORDER_KEEPING:
        return True
    src = node.args[0]
    same_size = isinstance(src, fx.Node) and value_of(src).numel() == value_of(node).numel()
    return name in ("prims.broadcast_in_dim", "aten.expand") and same_size


def source_index(node: fx.Node, idx: list[str]) -> list[str]:
    """For a view node read at ``idx``: the index tuple of its source (``node.args[0]``)."""
    name, args = packet_name(node), list[Any](node.args)  # fx arguments: checked by use below
    src = args[0]
    assert isinstance(src, fx.Node)
    sshape, oshape = shape_of(src), shape_of(node)
    if name == "prims.broadcast_in_dim":
        return ["0" if sshape[k] == 1 else idx[d] for k, d in enumerate(args[2])]
    if name in ("prims.view_of", "aten.alias", "aten.lift_fresh_copy"):
        return list(idx)
    if name == "prims.squeeze":
        out, it = [], iter(idx)
        for k in range(len(sshape)):
            out.append("0" if k in set(args[1]) else next(it))
        return out
    if name in ("prims.transpose", "aten.permute"):
        perm = [p % len(sshape) for p in args[1]]
        out = ["0"] * len(sshape)
        for k, p in enumerate(perm):
            out[p] = idx[k]
        return out
    if name == "prims.rev":
        dims = {d % len(sshape) for d in args[1]}
        return [f"({sshape[k] - 1} - {e})" if k in dims else e for k, e in enumerate(idx)]
    if name == "prims.split_dim":
        dim = int(args[1]) % len(sshape)
        inner = oshape[dim + 1]
        merged = f"({_mul(idx[dim], inner)} + {idx[dim + 1]})" if inner != 1 else idx[dim]
        return [*idx[:dim], merged, *idx[dim + 2 :]]
    if name == "prims.collapse_view":  # source dims start .. start + merged - 1 became one
        start, count = int(args[1]), len(sshape) - len(oshape) + 1
        return [*idx[:start], *delinear(idx[start], sshape[start : start + count]), *idx[start + 1 :]]
    if name in ("prims.reshape", "aten.view", "aten.reshape", "aten._unsafe_view"):
        return delinear(linear(idx, oshape), sshape)
    if name == "aten.select":  # the dim taken at one index is gone from the view
        dim = int(args[1]) % len(sshape)
        at = int(args[2]) % sshape[dim]
        return [*idx[:dim], str(at), *idx[dim:]]
    if name == "aten.slice":  # slice(x, dim, start, end, step)
        dim = int(args[1]) % len(sshape)
        start = int(args[2]) if len(args) > 2 and args[2] is not None else 0
        start = max(0, min(start + sshape[dim] if start < 0 else start, sshape[dim]))
        step = int(args[4]) if len(args) > 4 else 1
        moved = f"({start} + {_mul(idx[dim], step)})" if start else _mul(idx[dim], step) if idx[dim] != "0" else "0"
        return [*idx[:dim], moved, *idx[dim + 1 :]]
    if name == "aten.expand":
        lead = len(oshape) - len(sshape)
        return ["0" if sshape[k] == 1 else idx[k + lead] for k in range(len(sshape))]
    if name == "aten.as_strided":
        base, offset = strided_source(node, idx)
        return delinear(offset, shape_of(base))
    raise Unsupported(f"{name}: not a view the lowering maps")


def strided_source(node: fx.Node, idx: list[str]) -> tuple[fx.Node, str]:
    """An ``as_strided`` view read at ``idx``: the contiguous value whose storage it reads, and
    the row-major offset into it. Its strides and offset are the storage's, not its source's:
    a view of a permuted value (a head split's ``x[..., 0::2]``) reads the storage of the last
    contiguous value before the permute. A reader reads that value at the offset itself rather
    than the offset taken apart into an index tuple and put back together (a div and a mod a
    dimension, which kept GCC from vectorising the loop)."""
    args = list[Any](node.args)
    base = storage_base(node)
    size, strides = [int(d) for d in args[1]], [int(s) for s in args[2]]
    # no storage offset given: the source's own (torch's rule)
    given = int(args[3]) if len(args) > 3 and args[3] is not None else value_of(args[0]).storage_offset()
    offset = given - value_of(base).storage_offset()
    highest = offset + sum((d - 1) * s for d, s in zip(size, strides, strict=True) if d > 0)
    if offset < 0 or min(strides, default=0) < 0 or (math.prod(size) and highest >= value_of(base).numel()):
        raise Unsupported("aten.as_strided: reads storage outside the value it views")
    terms = [_mul(e, s) for e, s in zip(idx, strides, strict=True)]
    terms = [t for t in terms if t != "0"] + ([str(offset)] if offset else [])
    return base, " + ".join(terms) or "0"


def storage_base(node: fx.Node) -> fx.Node:
    """The nearest contiguous value an ``as_strided`` node views, back through the views that
    share its storage (a flip, a reshape that copies, a lifted constant make storage of their
    own: the walk stops there)."""
    src = node.args[0]
    while isinstance(src, fx.Node) and not value_of(src).is_contiguous():
        nxt = src.args[0] if kind_of(src) is NodeKind.VIEW else None
        if not isinstance(nxt, fx.Node) or not _same_storage(src, nxt):
            break
        src = nxt
    if not isinstance(src, fx.Node) or not value_of(src).is_contiguous():
        raise Unsupported("aten.as_strided: of a value that is not a view of a contiguous one")
    return src


def _same_storage(a: fx.Node, b: fx.Node) -> bool:
    """Whether the trace's fake tensors of ``a`` and ``b`` share one storage (a view's do)."""
    va, vb = value_of(a), value_of(b)
    if not (isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor)):
        return False
    return bool(va.untyped_storage()._cdata == vb.untyped_storage()._cdata)
