"""The general lowering of the built-in agent (issue #18): any reference traced to primitives and
a few ops kept whole (``trace``), scheduled into buffers and steps (``schedule``), written as C++
steps (``cpp_emit``, ``cpp_reduce``, ``cpp_kept``, ``cpp_fuse``) or Triton kernels (``triton_emit``)
over the IR's index algebra (``ir``), and packaged as a candidate (``program`` for C++,
``triton_program`` for Triton; ``py_side`` writes the Python both share): the built-in coder's
``lowered`` family on either backend. Both languages read graph values through one
``reader.Reader`` (each in its ``Dialect``), which records what every value depends on, so loops
hoist invariant values from that record (``code.hoist``); code is written into a
``code.CodeBuffer``, which owns the indentation. A pointwise node is written from the
op table (``builtin.ops``: ``cpp_expr`` reads each op's C++ forms, ``triton_expr`` its Triton forms);
the pointwise nodes the trace keeps are the primitives of that table.

It is the coder's last family: an op that the row-wise, residual-norm or pointwise family
recognises (softmax, layernorm, a GELU chain) is written by that family and never reaches this
package (see ``forge.agents.builtin``). To see a change here, use an op outside them (a
convolution, a pooling, a scan: ``tests/agents/test_lowered_end_to_end.py`` has one of each).
"""

from forge.agents.builtin.lowering.program import LoweredGraph, analyze, canonical, render, space
from forge.agents.builtin.lowering.trace import KEPT, Traced, decompositions, kind_of, packet_name, trace, unloweable

__all__ = [
    "KEPT",
    "LoweredGraph",
    "Traced",
    "analyze",
    "canonical",
    "decompositions",
    "kind_of",
    "packet_name",
    "render",
    "space",
    "trace",
    "unloweable",
]
