"""Which buffers a C++ candidate keeps channels-last (NHWC in memory, NCHW to the graph).

oneDNN convolves NHWC data without reordering it; given NCHW it reorders the input into its own
blocked layout and the result back on every call. torch.compile's CPU backend keeps a
convolution's tensors channels-last for that reason (it read 1.5x eager on
``examples/models/cnn_block.py``). The lowering does the same inside one candidate: a 2-D
convolution's input, weight and result are channels-last buffers; the steps that write them
write in that order, the steps that read them read through it (``reader``), and what the op
returns is NCHW as the reference's is, written by the epilogue that reads the last result.

A buffer stays row-major when something would see its layout: it is returned (or a reshape of
it is), torch reads it through a view (a view of a channels-last tensor is not the reference's
view), an ``as_strided`` reads it (its offsets are the row-major storage's), or a step that
only writes row-major writes it (a reduction, a pooling, another library call). A convolution
with any of its three buffers left row-major runs as the reference does.
"""

from __future__ import annotations

from torch import fx

from forge.agents.builtin.lowering.ir import shape_of
from forge.agents.builtin.lowering.trace import NodeKind, kind_of, packet_name

CHANNELS_LAST = (0, 2, 3, 1)  # storage dim k holds the logical dim CHANNELS_LAST[k]: N, H, W, C


def conv2d_parts(node: fx.Node) -> tuple[fx.Node, fx.Node] | None:
    """A 2-D, not transposed convolution's input and weight, when both are graph values."""
    if packet_name(node) != "aten.convolution" or len(node.args) < 7 or node.args[6]:
        return None
    x, w = node.args[0], node.args[1]
    if not isinstance(x, fx.Node) or not isinstance(w, fx.Node) or len(shape_of(x)) != 4:
        return None
    return x, w


def storage_index(idx: list[str], perm: tuple[int, ...] | None) -> list[str]:
    """A logical index tuple in the order its buffer stores it."""
    return idx if perm is None else [idx[p] for p in perm]


def storage_shape(shape: tuple[int, ...] | list[int], perm: tuple[int, ...] | None) -> list[int]:
    return list(shape) if perm is None else [shape[p] for p in perm]


def channels_last_slots(
    buffers: dict[fx.Node, int],
    writers: dict[fx.Node, str],
    convs: list[fx.Node],
    returned: set[fx.Node],
    library_views: set[fx.Node],
) -> dict[int, tuple[int, ...]]:
    """The slots kept channels-last. ``writers``: buffer node -> how it is written (``pointwise``,
    ``library``, ``input``, or another step kind); ``returned``: the buffer nodes the op returns
    or returns a view of; ``library_views``: buffer nodes torch reads through a view; ``convs``:
    the library convolution nodes (each one buffer)."""
    seen = returned | library_views
    blocked = {buffers[n] for n in buffers if n in seen or not _may_be_channels_last(n, writers)}
    chosen: dict[fx.Node, tuple[int, int, int]] = {}
    for conv in convs:
        parts = conv2d_parts(conv)
        if parts is not None and all(p in buffers for p in parts):
            chosen[conv] = (buffers[parts[0]], buffers[parts[1]], buffers[conv])
    while True:  # a convolution left as the reference runs it leaves its result row-major, and so on
        keep = {c: s for c, s in chosen.items() if not set(s) & blocked}
        # a library result is channels-last only if its own convolution makes it so
        blocked |= {buffers[c] for c in chosen if c not in keep}
        if keep == chosen:
            break
        chosen = keep
    return {slot: CHANNELS_LAST for slots in chosen.values() for slot in slots}


def _may_be_channels_last(node: fx.Node, writers: dict[fx.Node, str]) -> bool:
    if len(shape_of(node)) != 4 or _reads_as_strided(node):
        return False
    writer = writers.get(node)
    if writer == "pointwise":
        return kind_of(node) is NodeKind.POINTWISE  # a concatenation's writer writes row-major
    return writer in ("library", "input")


def _reads_as_strided(node: fx.Node) -> bool:
    stack = list(node.users)
    while stack:
        user = stack.pop()
        if packet_name(user) == "aten.as_strided":
            return True
        if kind_of(user) is NodeKind.VIEW:
            stack.extend(user.users)
    return False
