"""The general lowering of the built-in agent (in progress, issue #18): a reference traced to
primitives plus a few ops kept whole (``trace``). The IR, fusion and the C++/Triton emitters build
on it."""

from forge.agents.builtin.lowering.trace import KEPT, Traced, decompositions, kind_of, packet_name, trace, unloweable

__all__ = ["KEPT", "Traced", "decompositions", "kind_of", "packet_name", "trace", "unloweable"]
