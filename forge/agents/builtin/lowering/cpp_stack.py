"""C++ for a pointwise step whose value is a stack along its last dimension (``torch.stack(...,
dim=-1)``: a concatenation of parts one element wide there), as rotary embeddings write their
rotated pairs.

Read as a concatenation (``reader.Reader``), every output element computes every part and
selects one by its index's parity, and the loop's merged index reaches the parts through a
division and a remainder: GCC vectorised that with gathers at best. Here the loop runs over the
stack's other dimensions, its SIMD loop over the last of them with nothing merged (so a part's
loads stay affine in the loop variable: strided loads GCC groups), and the body computes each
part once and stores it at its place in the interleaved output.
"""

from __future__ import annotations

from typing import Any

from torch import fx

from forge.agents.builtin.lowering.code import Statement
from forge.agents.builtin.lowering.cpp_emit import chunked_loop, cpp_reader, step_function
from forge.agents.builtin.lowering.ir import dtype_of, keeps_order, linear, shape_of
from forge.agents.builtin.lowering.reader import CAT_NODES, without_buffer
from forge.agents.builtin.lowering.schedule import Schedule
from forge.agents.builtin.lowering.trace import NodeKind, kind_of, packet_name

_COPIES = frozenset({"prims.clone", "prims.convert_element_type"})


def stacked_parts(node: fx.Node, sched: Schedule) -> tuple[fx.Node, list[fx.Node]] | None:
    """The stack ``node`` holds, and its parts, when it is one along its last dimension: itself,
    or read through copies of the same dtype and views that keep row-major order (a flatten of
    the pairs), none of which has a buffer of its own. None otherwise."""
    cat = node
    while (packet_name(cat) in _COPIES or (kind_of(cat) is NodeKind.VIEW and keeps_order(cat))) and isinstance(
        cat.args[0], fx.Node
    ):
        source = cat.args[0]
        if source in sched.buffers or dtype_of(source) != dtype_of(node):
            return None
        cat = source
    if packet_name(cat) not in CAT_NODES or not isinstance(cat.args[0], list | tuple):
        return None
    shape = shape_of(cat)
    dim = cat.args[1] if len(cat.args) > 1 else cat.kwargs.get("dim", 0)
    if len(shape) < 2 or not isinstance(dim, int) or dim % len(shape) != len(shape) - 1:
        return None
    parts = list(cat.args[0])
    if not all(isinstance(p, fx.Node) and shape_of(p)[-1] == 1 for p in parts):
        return None
    return cat, parts


def stacked_step(
    name: str, node: fx.Node, stack: tuple[fx.Node, list[fx.Node]], sched: Schedule, cfg: dict[str, Any]
) -> str:
    """A step writing ``node``, the stack of ``stack`` (the stack and its parts, ``stacked_parts``):
    one parallel task per position of the stack's dimensions but the last two, a SIMD loop over
    the last but one, each part stored at its offset in the interleaved last dimension."""
    cat, parts = stack
    shape = list(shape_of(cat))[:-1]
    count = len(parts)
    outer_names = [f"i{k}" for k in range(len(shape) - 1)]
    inner = shape[-1]
    reader = cpp_reader(without_buffer(sched, node))
    base = linear([*outer_names, "0"], shape)
    row = "k" if base == "0" else f"{base} + k"
    stores = []
    for j, part in enumerate(parts):
        value = reader.value(part, [*outer_names, "k", "0"])
        stores.append(Statement(f"y[({row}) * {count} + {j}] = {value};"))
    # the SIMD loop split into chunks when there are too few rows, as pointwise steps do
    code = chunked_loop(outer_names, shape[:-1], inner, "k", [*reader.lines, *stores], cfg)
    return step_function(name, sched, reader.reads, {sched.slot(node): "y"}, code)
