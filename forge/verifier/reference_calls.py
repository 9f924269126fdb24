"""Counting the calls of the reference class's own ``forward`` in a process that runs a candidate.

A ModelNew that runs the reference on the op's own inputs (a fallback taken) is not the kernel it
claims to be, and timing it would time the reference against itself. The candidate worker and the
user loop's process wrap their own copy of the class; the count is an observation the trusted
parent judges.
"""

from __future__ import annotations

from typing import Any


class ReferenceCalls:
    """Wraps ``cls.forward`` to count its calls until ``restore``."""

    def __init__(self, cls: type) -> None:
        self.count = 0
        self.cls = cls
        self.own = cls.__dict__.get("forward")  # None: inherited, removed again by ``restore``
        original = cls.forward  # type: ignore[attr-defined]

        def forward(instance: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(instance, *args, **kwargs)

        cls.forward = forward  # type: ignore[attr-defined]

    def restore(self) -> None:
        """Put the class's own forward back (the wrapper's call would cost the reference's side)."""
        if self.own is None:
            del self.cls.forward  # type: ignore[attr-defined]
        else:
            self.cls.forward = self.own  # type: ignore[attr-defined]


__all__ = ["ReferenceCalls"]
