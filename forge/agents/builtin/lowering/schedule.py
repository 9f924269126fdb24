"""Which values of a traced graph get a buffer, and the steps that fill them, in order.

Everything pointwise (and every view, gather, iota, constant) is inlined into the kernel that
reads it: a chain of elementwise ops costs no memory pass of its own, and a norm becomes its
reductions plus one pass that writes the result. A value gets a buffer when it is:

- a graph input (the op's inputs, then the module's parameters and buffers);
- a reduction's, scan's, arg-reduction's or pooling's result (``reduce``/``scan``/``arg``/``pool``);
- a library producer's result (``library``: mm/bmm/addmm/convolution/SDPA run by torch, as in
  the reference; their inputs are buffers, or views of buffers taken in Python);
- returned by the graph or copied into a module buffer (state is output), when it is not already
  a buffer (``pointwise``).

A returned value that is a pure reshape of a buffer (a squeeze after pooling) is returned as a
view of it, with no pass of its own.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from enum import StrEnum

from torch import fx

from forge.agents.builtin.lowering.ir import Unsupported, int_arg, keeps_order, shape_of, value_of
from forge.agents.builtin.lowering.layout import channels_last_slots
from forge.agents.builtin.lowering.trace import OTHER, NodeKind, Traced, kind_of, packet_name

REDUCE_OPS = frozenset({"prims.sum", "prims.amax", "prims.amin", "prims.prod", "prims.var"})
SCAN_OPS = frozenset({"aten.cumsum", "aten.cumprod", "aten.logcumsumexp"})
ARG_OPS = frozenset({"aten.argmax", "aten.argmin"})
POOL_OPS = frozenset({f"aten.max_pool{d}d_with_indices" for d in (1, 2, 3)} | {f"aten.avg_pool{d}d" for d in (1, 2, 3)})
LIBRARY_OPS = frozenset(
    {
        "aten.mm",
        "aten.bmm",
        "aten.addmm",
        "aten.convolution",
        "aten.scaled_dot_product_attention",
        "aten._scaled_dot_product_flash_attention_for_cpu",
        "aten.convolution_backward",
        "aten._scaled_dot_product_flash_attention_for_cpu_backward",
    }
)
# the "other" nodes read inline where they are used: all but state updates, allocations and tuple items
_INLINE_OTHER = OTHER - {"aten.copy_", "aten.empty", "getitem"}


class StepKind(StrEnum):
    """What a step of the schedule computes (each kind has its own writer)."""

    POINTWISE = "pointwise"
    REDUCE = "reduce"
    SCAN = "scan"
    ARG = "arg"  # argmax/argmin, max/min over a dim
    POOL = "pool"
    LIBRARY = "library"  # a torch call the reference makes (mm, convolution, SDPA)


@dataclass(frozen=True)
class Step:
    kind: StepKind
    node: fx.Node  # the node computed
    writes: tuple[fx.Node, ...]  # the buffer nodes it fills (getitems of a tuple result)


@dataclass
class Schedule:
    inputs: list[fx.Node]  # placeholders, in call order
    buffers: dict[fx.Node, int] = field(default_factory=dict)  # node -> slot
    steps: list[Step] = field(default_factory=list)
    outputs: list[fx.Node] = field(default_factory=list)  # returned nodes
    copies: list[tuple[fx.Node, fx.Node]] = field(default_factory=list)  # (module buffer, new value)
    constants: list[fx.Node] = field(default_factory=list)  # tensors made in forward (get_attr)
    # written node -> the library result whose storage it takes (``_overwrite_library_results``)
    overwrites: dict[fx.Node, fx.Node] = field(default_factory=dict)
    # slot -> the order its buffer stores the logical dims in (``layout``); absent: row-major
    layouts: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # torch calls' results only torch calls read (through views): kept as torch laid them out
    # (``_strided_results``)
    strided: set[fx.Node] = field(default_factory=set)

    def slot(self, node: fx.Node) -> int:
        return self.buffers[node]


def step_kind(node: fx.Node) -> StepKind | None:
    """The kind of step a node needs a buffer for (None: it is inlined where it is read)."""
    name = packet_name(node)
    if name in REDUCE_OPS or (name in ("aten.max", "aten.min") and len(node.args) == 1):
        return StepKind.REDUCE
    if name in ("aten.max", "aten.min"):
        return StepKind.ARG  # max.dim / min.dim: values and indices
    if name in SCAN_OPS:
        return StepKind.SCAN
    if name in ARG_OPS:
        return StepKind.ARG
    if name in POOL_OPS:
        return StepKind.POOL
    if name in LIBRARY_OPS:
        return StepKind.LIBRARY
    return None


def _live(graph: fx.Graph) -> set[fx.Node]:
    roots = [n for n in graph.nodes if n.op == "output" or packet_name(n) == "aten.copy_"]
    live: set[fx.Node] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in live:
            continue
        live.add(node)
        stack.extend(node.all_input_nodes)
    return live


def view_source(node: fx.Node, sched: Schedule, order_keeping: bool = False) -> fx.Node | None:
    """The buffer node a chain of views starts from (None: something computed is in the way).
    ``order_keeping``: only views that keep row-major order (then ``node`` is that buffer reshaped)."""
    while node not in sched.buffers:
        if kind_of(node) is not NodeKind.VIEW or not isinstance(node.args[0], fx.Node):
            return None
        if order_keeping and not keeps_order(node):
            return None
        node = node.args[0]
    return node


def _add_buffer(sched: Schedule, node: fx.Node) -> None:
    if node not in sched.buffers:
        sched.buffers[node] = len(sched.buffers)


def _viewed(node: fx.Node) -> fx.Node:
    """The value a chain of views reads (``node`` itself when it is no view). A torch call reads a
    computed value through its views: the value gets the buffer, so that calls reading it through
    views of their own share it (a decoder layer's normalised input was computed three times,
    once for each of its query, key and value projections)."""
    while kind_of(node) is NodeKind.VIEW and isinstance(node.args[0], fx.Node) and node.args[0].op != "placeholder":
        if packet_name(node) == "aten.as_strided":  # its strides are the traced value's, not a row-major buffer's
            break
        node = node.args[0]
    return node


def _materialise(sched: Schedule, node: fx.Node) -> None:
    """Give ``node`` a buffer with a pointwise step, unless it has one (steps are sorted later)."""
    if node in sched.buffers:
        return
    _add_buffer(sched, node)
    sched.steps.append(Step(StepKind.POINTWISE, node, (node,)))


def _check_node(node: fx.Node) -> None:
    kind = kind_of(node)
    if kind is None:
        raise Unsupported(f"{packet_name(node)}: not in the lowering's node set")
    name = packet_name(node)
    if kind is NodeKind.OTHER and name not in _INLINE_OTHER | {"aten.copy_", "getitem"}:
        raise Unsupported(f"{name}: not a node the lowering emits")
    if kind is NodeKind.KEPT and step_kind(node) is None:
        raise Unsupported(f"{name}: kept whole but has no kernel of its own yet")


def schedule(
    traced: Traced, run_by_torch: frozenset[StepKind] = frozenset({StepKind.LIBRARY}), channels_last: bool = False
) -> Schedule:
    """The buffers and steps of ``traced`` (raises Unsupported naming the first node it cannot take).
    ``run_by_torch``: the kinds of step a candidate runs as torch calls, whose inputs are buffers
    (or views of them) rather than values inlined into a kernel. ``channels_last``: 2-D
    convolutions' buffers are kept channels-last where nothing sees it (``layout``)."""
    graph = traced.graph.graph
    live = _live(graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    sched = Schedule(inputs=placeholders)
    for node in placeholders:
        _add_buffer(sched, node)
    for node in graph.nodes:  # the candidate holds their values (see py_side.constant_table)
        if node.op == "get_attr" and node in live:
            _add_buffer(sched, node)
            sched.constants.append(node)
    output_node = next(n for n in graph.nodes if n.op == "output")
    for node in graph.nodes:
        if node not in live or node.op != "call_function":
            continue
        _check_node(node)
        kind = step_kind(node)
        if kind is None:
            continue
        getitems = [u for u in node.users if u.target is operator.getitem and u in live]
        writes = tuple(sorted(getitems, key=lambda u: int_arg(u, 1))) if getitems else (node,)
        for w in writes:
            _add_buffer(sched, w)
        sched.steps.append(Step(kind, node, writes))
        if kind in run_by_torch:
            for arg in node.all_input_nodes:
                if view_source(arg, sched) is None:
                    _materialise(sched, _viewed(arg))
    for node in graph.nodes:
        if packet_name(node) == "aten.copy_" and node in live:
            dst, src = node.args[0], node.args[1]
            if not isinstance(dst, fx.Node) or not isinstance(src, fx.Node):
                raise Unsupported("aten.copy_: of something other than tensors")
            if dst.op != "placeholder":  # an in-place op on a value the op made (ReLU(inplace=True))
                _check_in_place(node, dst, src, live)
                continue
            if any(u is not node and u in live and _after(u, node) for u in dst.users):
                raise Unsupported("aten.copy_: the updated buffer is read again after the update")
            _materialise(sched, src)
            sched.copies.append((dst, src))
    results = output_node.args[0]
    for out in results if isinstance(results, list | tuple) else [results]:
        if not isinstance(out, fx.Node):
            raise Unsupported("the reference returns something other than tensors")
        if out.op == "placeholder":
            raise Unsupported("the reference returns one of its inputs unchanged")
        if view_source(out, sched, order_keeping=True) is None:
            _materialise(sched, out)
        sched.outputs.append(out)
    order = {n: i for i, n in enumerate(graph.nodes)}
    sched.steps.sort(key=lambda s: order[s.node])
    for node in sched.buffers:
        shape_of(node)  # every buffer is a tensor with a static shape
    if channels_last:
        sched.layouts = _channels_last(sched)
    _overwrite_library_results(sched, live)
    sched.strided = _strided_results(sched, live, run_by_torch)
    return sched


def _read_by_torch_only(node: fx.Node, live: set[fx.Node], run_by_torch: frozenset[StepKind]) -> bool:
    stack = [u for u in node.users if u in live]
    while stack:
        user = stack.pop()
        if user.op == "call_function" and kind_of(user) is NodeKind.VIEW:
            stack.extend(u for u in user.users if u in live)
        elif user.op != "call_function" or step_kind(user) not in run_by_torch:
            return False
    return True


def _strided_results(sched: Schedule, live: set[fx.Node], run_by_torch: frozenset[StepKind]) -> set[fx.Node]:
    """The results of torch calls that only other torch calls read, through views: they keep the
    strides torch gave them. Made row-major, an attention's output (SDPA returns it with its heads
    inside its rows) was copied once there, and again by the reshape that merges its heads before
    the output projection."""
    found = set()
    taken = set(sched.overwrites.values())
    for st in sched.steps:
        if st.kind not in run_by_torch:
            continue
        for w in st.writes:
            if w in taken or sched.slot(w) in sched.layouts or w in sched.outputs:
                continue
            if _read_by_torch_only(w, live, run_by_torch):
                found.add(w)
    return found


def _channels_last(sched: Schedule) -> dict[int, tuple[int, ...]]:
    writers = {n: "input" for n in sched.inputs}
    library_views: set[fx.Node] = set()
    for st in sched.steps:
        for w in st.writes:
            writers[w] = str(st.kind) if st.writes == (st.node,) or st.kind is not StepKind.LIBRARY else "tuple"
        if st.kind is StepKind.LIBRARY:
            library_views |= {
                source
                for arg in st.node.all_input_nodes
                if arg not in sched.buffers and (source := view_source(arg, sched)) is not None
            }
    convs = [st.node for st in sched.steps if st.kind is StepKind.LIBRARY]
    returned = {source for out in sched.outputs if (source := view_source(out, sched)) is not None}
    return channels_last_slots(sched.buffers, writers, convs, returned, library_views)


def _overwrite_library_results(sched: Schedule, live: set[fx.Node]) -> None:
    """A pointwise step whose value reads a library result (a convolution's, a matmul's) element
    for element, where nothing else reads that result, writes into the result's own storage: a
    fresh output costs the page faults of a new allocation and a second buffer's cache lines (a
    convolution's batch norm and ReLU written over its result took 0.01 ms, into a new tensor
    0.09 ms: 8x32x32x32 floats on 2 cores)."""
    library = {w for st in sched.steps if st.kind is StepKind.LIBRARY for w in st.writes}
    if not library:
        return
    order = {n: i for i, n in enumerate(next(iter(library)).graph.nodes)}
    taken: set[fx.Node] = set()
    for st in sched.steps:
        if st.kind is not StepKind.POINTWISE or st.writes != (st.node,) or kind_of(st.node) is not NodeKind.POINTWISE:
            continue
        region = inlined_region(st.node, sched)
        nodes = sorted(region.nodes, key=order.__getitem__)
        for source in sorted(library & region.leaves - taken, key=lambda n: n.name):
            same_layout = sched.layouts.get(sched.slot(source)) == sched.layouts.get(sched.slot(st.node))
            if same_layout and _same_element_only(st.node, source, nodes, live, sched):
                sched.overwrites[st.node] = source
                sched.buffers[st.node] = sched.buffers[source]
                taken.add(source)
                break


@dataclass
class InlinedRegion:
    nodes: set[fx.Node]  # the nodes inlined into a step's value, the value itself included
    leaves: set[fx.Node]  # the buffers they read


def inlined_region(root: fx.Node, sched: Schedule) -> InlinedRegion:
    """The nodes computed inline into ``root``'s value (up to the buffers it loads), and those buffers."""
    region = InlinedRegion({root}, set())
    stack = list(root.all_input_nodes)
    while stack:
        node = stack.pop()
        if node in sched.buffers:
            region.leaves.add(node)
        elif node not in region.nodes:
            region.nodes.add(node)
            stack.extend(node.all_input_nodes)
    return region


def _same_element_only(
    root: fx.Node, source: fx.Node, region: list[fx.Node], live: set[fx.Node], sched: Schedule
) -> bool:
    """Every read of ``source`` in ``root``'s value is of the element ``root`` writes (a chain of
    pointwise ops of ``root``'s shape, no view, broadcast or gather on the way), and nothing
    outside that value reads ``source`` or anything computed from it there."""
    if source in sched.outputs or shape_of(source) != shape_of(root) or value_of(source).dtype != value_of(root).dtype:
        return False
    if any(source is dst or source is src for dst, src in sched.copies):
        return False
    cone = {source}
    for node in region:  # in graph order, inputs first: a node reaches source through its inputs
        if any(a in cone for a in node.all_input_nodes):
            cone.add(node)
    inside = set(region)
    for node in cone:
        if node is not source and (kind_of(node) is not NodeKind.POINTWISE or shape_of(node) != shape_of(root)):
            return False
        if node is not root and any(u in live and u not in inside for u in node.users):
            return False
    return root in cone


def _check_in_place(node: fx.Node, dst: fx.Node, src: fx.Node, live: set[fx.Node]) -> None:
    """An in-place update of a value the op made is read as the new value itself (``reader``):
    only where nothing reads the old value after it (nor a view of it, which would see the update),
    and the update neither broadcasts nor casts."""
    # a view taken before the update sees it too (an alias): refused as a read after it
    if any(u is not node and u in live and (_after(u, node) or kind_of(u) is NodeKind.VIEW) for u in dst.users):
        raise Unsupported("aten.copy_: the updated value is read again after the update, or through a view")
    if shape_of(src) != shape_of(dst) or value_of(src).dtype != value_of(dst).dtype:
        raise Unsupported("aten.copy_: an update that broadcasts or casts")


def in_place_source(node: fx.Node) -> fx.Node | None:
    """The new value of an in-place update of a value the op made (None: not one)."""
    if packet_name(node) != "aten.copy_" or not isinstance(node.args[0], fx.Node) or node.args[0].op == "placeholder":
        return None
    src = node.args[1]
    return src if isinstance(src, fx.Node) else None


def _after(a: fx.Node, b: fx.Node) -> bool:
    node = b.next
    while node.op != "root":
        if node is a:
            return True
        node = node.next
    return False
