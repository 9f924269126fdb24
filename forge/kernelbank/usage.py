"""Which bank kernels really ran: ``KernelBank.watch()`` counts, per op, the calls of the modules
the bank loaded or patched, and those in which the op's reference ``forward`` ran instead (a
fallback: inputs of a shape, dtype, device or mode the kernel was not built for, gradients needed,
or a kernel that failed).

    with bank.watch() as seen:
        model(x)
    print(seen.report())      # rmsnorm: 12 calls, the kernel ran on 12

While the block runs, each watched op's reference class has a counting ``forward``; it is put
back when the block ends (a diagnostic, not for the hot path). Outside a watch the dispatcher
pays one global read per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from forge.core.forward_tap import ForwardTap


@dataclass
class OpUsage:
    """One op's calls through the bank while watched."""

    op: str
    calls: int = 0  # calls of loaded or patched modules (through the bank's dispatcher)
    fallbacks: int = 0  # of those, the calls in which the reference's forward ran

    @property
    def kernel_calls(self) -> int:
        return self.calls - self.fallbacks

    def __str__(self) -> str:
        if not self.calls:
            return f"{self.op}: not called"
        if not self.fallbacks:
            return f"{self.op}: {self.calls} calls, the kernel ran on every one"
        return f"{self.op}: {self.calls} calls, the reference ran on {self.fallbacks} (fallback)"


@dataclass
class Watch:
    """What one ``KernelBank.watch()`` block saw, by op name."""

    ops: dict[str, OpUsage] = field(default_factory=dict)
    _inside: threading.local = field(default_factory=threading.local)

    def usage(self, op: str) -> OpUsage:
        return self.ops.setdefault(op, OpUsage(op))

    def report(self) -> str:
        return "\n".join(str(u) for u in self.ops.values()) or "no bank module was called"

    def observe(self, op: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one dispatcher call of ``op``, noting whether the reference ran during it."""
        usage = self.usage(op)
        usage.calls += 1
        stack: list[list[bool]] = self._inside.__dict__.setdefault("stack", [])
        stack.append([False])
        try:
            return call(*args, **kwargs)
        finally:
            if stack.pop()[0]:
                usage.fallbacks += 1

    def reference_ran(self) -> None:
        """Called by a watched reference ``forward``: the innermost dispatcher call fell back."""
        stack = self._inside.__dict__.get("stack")
        if stack:
            stack[-1][0] = True


# The watch in force (None: not watching), read by the dispatcher on every call.
ACTIVE: Watch | None = None


@contextmanager
def watching(reference_classes: list[type]) -> Iterator[Watch]:
    """Count bank calls and fallbacks while the block runs (``KernelBank.watch``)."""
    global ACTIVE
    if ACTIVE is not None:
        raise RuntimeError("a bank watch is already running: nest no watches")
    watch = Watch()
    taps = [ForwardTap(cls, watch.reference_ran) for cls in dict.fromkeys(reference_classes)]  # once each
    ACTIVE = watch
    try:
        yield watch
    finally:
        ACTIVE = None
        for tap in taps:
            tap.restore()


__all__ = ["ACTIVE", "OpUsage", "Watch", "watching"]
