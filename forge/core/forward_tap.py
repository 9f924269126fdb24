"""Tapping a class's own ``forward``: each call counted (and reported) until the tap is removed.

A ModelNew that runs the reference on the op's own inputs (a fallback taken) is not the kernel it
claims to be, and timing it would time the reference against itself. The candidate worker and the
user loop's process tap their own copy of the reference class, and ``KernelBank.watch`` taps a
user's class while its block runs; each then says what the count means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ForwardTap:
    """Wraps ``cls.forward`` so that each call adds to ``count`` and calls ``on_call``, until
    ``restore``."""

    def __init__(self, cls: type, on_call: Callable[[], None] | None = None) -> None:
        self.count = 0
        self.cls = cls
        self.own = cls.__dict__.get("forward")  # None: inherited, removed again by ``restore``
        original = cls.forward  # type: ignore[attr-defined]

        def forward(instance: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            if on_call is not None:
                on_call()
            return original(instance, *args, **kwargs)

        cls.forward = forward  # type: ignore[attr-defined]

    def restore(self) -> None:
        """Put the class's own forward back (the wrapper's call would cost the reference's side)."""
        if self.own is None:
            del self.cls.forward  # type: ignore[attr-defined]
        else:
            self.cls.forward = self.own  # type: ignore[attr-defined]


__all__ = ["ForwardTap"]
