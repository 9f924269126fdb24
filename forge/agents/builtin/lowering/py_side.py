"""The Python side of a lowered candidate, the same for its C++ and its Triton kernels: the
buffer table's loads (module state, then the op's inputs), the allocation of each step's
buffers, the torch calls of library producers (and, for Triton, of the ops kept whole), module
buffers written back after the last step, and the value returned."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.ir import Unsupported, dtype_of, int_arg, keeps_order, shape_of, value_of
from forge.agents.builtin.lowering.layout import CHANNELS_LAST
from forge.agents.builtin.lowering.schedule import Schedule, Step, view_source
from forge.agents.builtin.lowering.trace import Traced, packet_name


def _py_arg(value: Any, sched: Schedule) -> str:
    """A library call's argument as Python text (graph values as buffers or views of them)."""
    if isinstance(value, fx.Node):
        return _py_view(value, sched)
    if isinstance(value, list | tuple):
        inner = ", ".join(_py_arg(v, sched) for v in value)
        return f"[{inner}]"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    raise Unsupported(f"a library call's argument {value!r} cannot be written")


def _py_view(node: fx.Node, sched: Schedule) -> str:
    if node in sched.buffers:
        return f"b[{sched.slot(node)}]"
    if view_source(node, sched) is None:
        raise Unsupported(f"{packet_name(node)}: a library input that is neither a buffer nor its view")
    # prims' views are Python functions (55-60 us a call on a 2-core VM, three times a matmul's
    # share of SwiGLU's forward): the same views through ATen cost 2-3 us
    src = _py_arg(node.args[0], sched)
    if keeps_order(node):  # a row-major reshape: a view of a row-major buffer, a copy where the
        # views before it permuted one (the reference's library output kept its own strides, the
        # buffer holding it here is row-major)
        return f"torch.ops.aten.reshape.default({src}, {list(shape_of(node))!r})"
    if packet_name(node) == "prims.transpose":
        return f"torch.ops.aten.permute.default({src}, {list(node.args[1])!r})"  # type: ignore[arg-type]
    args = ", ".join(_py_arg(a, sched) for a in node.args)
    return f"{_op_path(node)}({args})"


def _op_path(node: fx.Node) -> str:
    """The node's ATen/prims overload as Python text (``torch.ops.aten.convolution.default``)."""
    target = node.target
    return f"torch.ops.{target.namespace}.{target._overloadpacket.__name__}.{target._overloadname}"  # type: ignore[union-attr]


def library_lines(step: Step, sched: Schedule) -> list[str]:
    """The torch call a step makes, as the reference makes it, into its buffers."""
    node = step.node
    call = _op_path(node)
    args = ", ".join(_py_arg(a, sched) for a in node.args)
    kwargs = "".join(f", {k}={_py_arg(v, sched)}" for k, v in node.kwargs.items())
    if step.writes == (node,):
        kept = "" if node in sched.strided else f".contiguous({_memory_format(node, sched)})"
        return [f"b[{sched.slot(node)}] = {call}({args}{kwargs}){kept}"]
    lines = [f"r = {call}({args}{kwargs})"]
    lines += [
        f"b[{sched.slot(w)}] = r[{int_arg(w, 1)}]" + ("" if w in sched.strided else ".contiguous()")
        for w in step.writes
    ]
    return lines


# oneDNN's matmul for a linear layer's product: on a 2-core AMD Zen 4 VM it took 0.93 ms where
# MKL's mm took 1.10 (512x256 by 256x704, float32); the tuner measures which wins here
ONEDNN_LINEAR = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def linear_parts(node: fx.Node) -> tuple[fx.Node, fx.Node, fx.Node | None] | None:
    """(input, weight, bias) when ``node`` is a linear layer's product: ``mm(a, w.t())`` or
    ``addmm(bias, a, w.t())`` with a contiguous float32 weight of (out, in) and a bias of (out,),
    which oneDNN's linear computes in one call; None otherwise."""
    name, args = packet_name(node), list[Any](node.args)
    if name == "aten.mm" and len(args) == 2 and not node.kwargs:
        bias, a, wt = None, args[0], args[1]
    elif name == "aten.addmm" and len(args) == 3 and node.kwargs in ({}, {"beta": 1, "alpha": 1}):
        bias, a, wt = args
    else:
        return None
    if not all(isinstance(v, fx.Node) for v in (a, wt, *([bias] if bias is not None else []))):
        return None
    if packet_name(wt) != "prims.transpose" or list(wt.args[1]) != [1, 0]:
        return None
    w = wt.args[0]
    if not isinstance(w, fx.Node) or not value_of(w).is_contiguous():
        return None
    if bias is not None and (shape_of(bias) != shape_of(w)[:1] or not value_of(bias).is_contiguous()):
        return None  # a broadcast or strided bias: not one oneDNN's linear takes as it is
    if any(dtype_of(v) != torch.float32 for v in (a, w, bias) if v is not None):
        return None
    return a, w, bias


def onednn_linear(step: Step, sched: Schedule) -> tuple[fx.Node, fx.Node, fx.Node | None] | None:
    """The parts of a step oneDNN's linear can compute (``linear_parts``), each a buffer or a view
    of one (a weight computed in ``forward`` has its transpose materialised for the product, and
    keeps the reference's call)."""
    parts = linear_parts(step.node) if ONEDNN_LINEAR and step.writes == (step.node,) else None
    if parts is None or any(view_source(p, sched) is None for p in parts if p is not None):
        return None
    return parts


def onednn_linear_lines(step: Step, sched: Schedule) -> list[str] | None:
    """A linear product's step as oneDNN's linear (None: the step is not one, see ``onednn_linear``)."""
    parts = onednn_linear(step, sched)
    if parts is None:
        return None
    a, w, bias = (_py_arg(v, sched) for v in parts)
    call = f"torch.ops.mkldnn._linear_pointwise.default({a}, {w}, {bias}, 'none', [], '')"
    return [f"b[{sched.slot(step.node)}] = {call}.contiguous()"]


def allocation(node: fx.Node, sched: Schedule, device: str | None = None) -> str:
    """The line allocating ``node``'s buffer (``device``: Python text of the device, else CPU)."""
    where = f", device={device}" if device else ""
    layout = _memory_format(node, sched)
    layout = f", {layout}" if layout else ""
    return f"b[{sched.slot(node)}] = torch.empty({shape_of(node)!r}, dtype={dtype_of(node)}{where}{layout})"


def _memory_format(node: fx.Node, sched: Schedule) -> str:
    """``memory_format=...`` for a buffer stored channels-last (``layout``), else nothing."""
    perm = sched.layouts.get(sched.slot(node))
    if perm is None:
        return ""
    if perm != CHANNELS_LAST:
        raise Unsupported(f"a buffer stored in the order {perm}: only channels-last is written")
    return "memory_format=torch.channels_last"


def load_lines(traced: Traced, sched: Schedule, device: str | None = None, constants: str = "_CONSTANTS") -> list[str]:
    """The table's first slots: the module's parameters, buffers and plain tensor attributes, the
    op's inputs, then the tensors ``forward`` makes from data (``constant_table``'s ``constants``)."""
    names = traced.state_names
    held = [f"_attr(self, {name!r}).detach()" for name in names] + [f"xs[{j}]" for j in range(traced.inputs)]
    lines = [f"b[{k}] = {value}.contiguous({_memory_format(sched.inputs[k], sched)})" for k, value in enumerate(held)]
    to = f".to({device})" if device else ""
    lines += [f"b[{sched.slot(node)}] = {constants}[{k}]{to}" for k, node in enumerate(sched.constants)]
    return lines


def built_for_source(
    lowered_inputs: list[tuple[tuple[int, ...], str]], traced: Traced, sched: Schedule, device: str
) -> str:
    """``_INPUTS`` and ``_built_for(xs)`` as Python source: whether the op's inputs have the
    shapes, dtypes and device (``device``: Python text of its type) the kernel was built for; and
    ``_STATE``, the module state's shapes and dtypes, which ``state_check`` compares."""
    names = traced.state_names
    state = [(list(shape_of(node)), str(dtype_of(node))) for _, node in zip(names, sched.inputs, strict=False)]
    return f"""_INPUTS = {lowered_inputs!r}
_STATE = [{", ".join(f"(torch.Size({s!r}), {d})" for s, d in state)}]


def _built_for(xs):
    return len(xs) == len(_INPUTS) and all(
        isinstance(x, torch.Tensor) and tuple(x.shape) == s and str(x.dtype) == d and x.device.type == {device}
        for x, (s, d) in zip(xs, _INPUTS)
    )
"""


def state_check(traced: Traced) -> list[str]:
    """The lines after ``load_lines`` that run the reference when the module's state (its first
    table slots) is not the shapes and dtypes the kernel was built for. A module built with other
    constructor arguments (the verifier's size variants shrink them; a user's ``bank.load`` may
    pass others) takes inputs of the same shape, and the kernel's sizes are constants: it would
    read past its buffers. Read from the loaded slots: through the module's attributes the check
    cost 32 us a call for a residual block's 12 tensors."""
    n = len(traced.state_names)
    if not n:
        return []
    return [f"if [(t.shape, t.dtype) for t in b[:{n}]] != _STATE:", "    return self._reference(xs)"]


def call_imports(call: str | None) -> str:
    """The helpers a kernel called as a template says needs (``model_new_class``)."""
    if call is None:
        return ""
    return "from forge.core.module_call import call_arguments, match_call, output_tensors, rebuild_output\n"


def model_new_class(call: str | None, layout: str | None, dispatch: str, methods: str) -> str:
    """``ModelNew``: ``forward`` runs the kernel (``dispatch``: its lines, at a method body's
    indent) on the inputs it was built for and the reference otherwise, and ``_reference(xs)``
    is the reference on the kernel's inputs. ``call``: the template of the call the op makes
    (``module_call``): ``forward`` then takes the module's own call (keyword arguments, None,
    tuples of tensors), runs the kernel only on a call made as the template says, and returns
    its outputs in the reference's structure (``layout``)."""
    if call is None:
        return f"""class ModelNew(Model):
    def forward(self, *xs):
        if not _built_for(xs):  # not the shapes, dtypes or device it was built for: the reference
            return super().forward(*xs)
{dispatch}
    def _reference(self, xs):
        return super().forward(*xs)
{methods}"""
    return f"""_CALL = {call!r}
_LAYOUT = {layout!r}


class ModelNew(Model):
    def forward(self, *args, **kwargs):
        xs = match_call(_CALL, args, kwargs)
        if xs is None or not _built_for(xs):  # another call, or other shapes, dtypes or device: the reference
            return super().forward(*args, **kwargs)
        return rebuild_output(_LAYOUT, self._flat(xs))

    def _flat(self, xs):
{dispatch}
    def _reference(self, xs):  # its outputs flat, as the kernel returns them
        args, kwargs = call_arguments(_CALL, xs)
        return tuple(output_tensors(super().forward(*args, **kwargs)))
{methods}"""


CONSTANT_LIMIT = 1 << 16  # bytes of a tensor made in forward that a candidate carries in its source


def constant_table(traced: Traced, sched: Schedule, name: str = "_CONSTANTS") -> str:
    """The table ``name``: the values of the tensors ``forward`` makes from data
    (``torch.tensor([...])``), bit for bit (NaN and inf included), as Python source."""
    items = []
    for node in sched.constants:
        value = getattr(traced.graph, str(node.target)).detach().contiguous().cpu()
        size = value.numel() * value.element_size()
        if size > CONSTANT_LIMIT:
            raise Unsupported(
                f"a tensor of {value.numel()} elements made in forward from data: register it as a buffer instead"
            )
        if not size:
            items.append(f"torch.empty({tuple(value.shape)!r}, dtype={value.dtype})")
            continue
        raw = value.reshape(-1).view(torch.uint8).numpy().tobytes()
        shape = tuple(value.shape)
        items.append(f"torch.frombuffer(bytearray({raw!r}), dtype=torch.uint8).view({value.dtype}).reshape({shape!r})")
    return f"{name} = [" + ", ".join(items) + "]\n"


def _placeholder_path(node: fx.Node, traced: Traced, sched: Schedule) -> str:
    k = sched.inputs.index(node)
    names = traced.state_names
    if k >= len(names):
        raise Unsupported("aten.copy_: into one of the op's inputs (the lowering updates module buffers only)")
    return names[k]


def closing_lines(traced: Traced, sched: Schedule, out_kind: str) -> list[str]:
    """Module buffers written back (state is output), then the return statement."""
    lines = []
    for dst, src in sched.copies:
        path = _placeholder_path(dst, traced, sched)
        lines.append(f"_attr(self, {path!r}).copy_(b[{sched.slot(src)}])")
    outs = []
    for out in sched.outputs:
        source = view_source(out, sched, order_keeping=True)
        base = f"b[{sched.slot(source)}]" if source is not None else f"b[{sched.slot(out)}]"
        outs.append(base if source is out or source is None else f"{base}.reshape({shape_of(out)!r})")
    ret = outs[0] if out_kind == "single" else f"({', '.join(outs)},)" if outs else "()"
    if out_kind not in ("single", "tuple"):
        ret = f"{out_kind}({ret})"
    lines.append(f"return {ret}")
    return lines
