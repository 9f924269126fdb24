"""The Python side of a lowered candidate's training path (``joint``), the same for its C++ and
Triton kernels: a ``torch.autograd.Function`` whose forward runs the forward graph's kernels and
saves what the backward graph takes, and whose backward runs the backward graph's kernels; and
the ``ModelNew`` methods that call them.

``ModelNew`` takes this path when autograd will need gradients (grad mode on, and an input or a
parameter requiring grad), else its inference kernels. It runs the reference instead where the
training kernels would give a wrong or missing gradient: module state of other shapes than the
kernels were built for, or a tensor requiring grad whose gradient the backward graph was not
traced to compute (a parameter frozen when the kernel was built).
"""

from __future__ import annotations

from forge.agents.builtin.lowering.code import CodeBuffer
from forge.agents.builtin.lowering.joint import JointLowered, Route, Source
from forge.agents.builtin.lowering.py_side import closing_lines, constant_table, load_lines

# Per graph: the prefix of its kernels, its constants' table and its method's name.
JOINT_NAMES = (("jf_", "_CONSTANTS_JF", "_joint_forward"), ("jb_", "_CONSTANTS_JB", "_joint_backward"))

_CODES = {Source.COMPUTED: 0, Source.GIVEN: 1, Source.NONE: 2}

FUNCTION = '''

def _route(routes, computed, given):
    return [computed[i] if s == 0 else given[i] if s == 1 else None for s, i in routes]


class _Joint(torch.autograd.Function):
    """The training kernels: the forward graph's, saving what the backward graph's take."""

    @staticmethod
    def forward(ctx, module, *primals):
        computed = module._joint_forward(primals)
        ctx.module = module
        ctx.save_for_backward(*_route(_JOINT_SAVED, computed, primals))
        return tuple(_route(_JOINT_OUT, computed, primals))

    @staticmethod
    def backward(ctx, *grads):
        if torch.is_grad_enabled():  # create_graph=True: its gradients would carry no graph
            raise RuntimeError(
                "forge training kernel: double backward (create_graph=True) is not provided; "
                "run this module's reference for it (forge bank: FORGE_KERNELBANK=off)"
            )
        given = [*ctx.saved_tensors, *grads]
        return (None, *_route(_JOINT_GRADS, ctx.module._joint_backward(given), given))


def _needs_grad(module, xs):
    return torch.is_grad_enabled() and (
        any(x.requires_grad for x in xs) or any(p.requires_grad for p in module.parameters())
    )
'''


def _routes(routes: list[Route]) -> str:
    return repr([(_CODES[r.source], r.index) for r in routes])


def joint_tables(joint: JointLowered) -> str:
    """Module-level source: the routes, the graphs' constant tables and the autograd Function."""
    trace = joint.trace
    text = f"_JOINT_STATE = {trace.state!r}\n"
    text += f"_JOINT_OUT = {_routes(trace.outputs)}\n_JOINT_SAVED = {_routes(trace.saved)}\n"
    text += f"_JOINT_GRADS = {_routes(trace.grads)}\n"
    for (traced, sched), (_, constants, _) in zip(joint.graphs, JOINT_NAMES, strict=True):
        text += constant_table(traced, sched, constants)
    return text + FUNCTION


def joint_method_body(joint: JointLowered, which: int, run_lines: list[str], device: str | None) -> list[str]:
    """The body of ``_joint_forward`` (``which`` 0) or ``_joint_backward`` (1), taking the graph's
    inputs as ``xs`` and returning its computed values: loads, ``run_lines``, the return."""
    traced, sched = joint.graphs[which]
    constants = JOINT_NAMES[which][1]
    body = [f"b = [None] * {len(sched.buffers)}"]
    if device:
        body.insert(0, f"{device} = xs[0].device")
    body += load_lines(traced, sched, device, constants)
    return [*body, *run_lines, *closing_lines(traced, sched, "tuple")]


def joint_entry(out_kind: str) -> str:
    """``ModelNew._joint``: the reference where the kernels would not give every gradient asked
    for (see the module docstring), else the autograd Function over the module's state and inputs."""
    code = CodeBuffer(level=1)
    code.line("")
    code.line("def _joint(self, xs):")
    with code.indented():
        code.line("state = [_attr(self, name) for name in _JOINT_STATE]")
        code.line("if [(t.shape, t.dtype) for t in state] != _STATE:")
        code.line("    return super().forward(*xs)")
        code.line("primals = [*state, *xs]")
        code.line("if any(t.requires_grad and s == 2 for t, (s, _) in zip(primals, _JOINT_GRADS, strict=True)):")
        code.line("    return super().forward(*xs)  # a gradient the backward was not traced for")
        code.line("out = _Joint.apply(self, *primals)")
        code.line("return out[0]" if out_kind == "single" else "return out")
    return code.text()


__all__ = ["JOINT_NAMES", "joint_entry", "joint_method_body", "joint_tables"]
