"""Source code built line by line at an indentation level (as Inductor's ``IndentedBuffer`` does).

Emitters write statements into a ``CodeBuffer`` and open blocks with ``block``; the buffer owns the
indentation, so no emitter passes indentation around as text. ``Statement`` is one line of a loop
body with the loop variables it depends on, which ``hoist`` reads to move invariant lines out of a
loop (computed by ``reader.Reader`` from the graph, not from the generated text).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

_UNIT = "    "


@dataclass(frozen=True)
class Statement:
    """One line of a loop body. ``uses``: the index variables its value depends on (through every
    load and operand it reads); None for a line that is not a value (a store, an accumulator's
    update), which stays where it was written."""

    line: str
    uses: frozenset[str] | None = None


def hoist(body: Sequence[Statement], var: str) -> tuple[list[Statement], list[Statement]]:
    """``body`` split into the values that do not depend on the loop variable ``var`` (computed
    once, before the loop) and the rest, each in its order. Hoisting is not only cheaper: GCC left
    a loop scalar ("control flow in loop") when it unswitched a select on a value that was
    invariant in it (an L2 normalisation's clamped norm ran 8x slower than eager)."""
    outside = [s for s in body if s.uses is not None and var not in s.uses]
    inside = [s for s in body if s.uses is None or var in s.uses]
    return outside, inside


class CodeBuffer:
    """Lines of source at the current indentation; ``text`` joins them."""

    def __init__(self, level: int = 0) -> None:
        self._lines: list[str] = []
        self._level = level

    def line(self, text: str = "") -> None:
        self._lines.append(f"{_UNIT * self._level}{text}" if text else "")

    def lines(self, texts: Iterable[str | Statement]) -> None:
        for t in texts:
            self.line(t.line if isinstance(t, Statement) else t)

    @contextmanager
    def indented(self) -> Iterator[None]:
        self._level += 1
        try:
            yield
        finally:
            self._level -= 1

    @contextmanager
    def block(self, head: str = "") -> Iterator[None]:
        """``head {``, the lines written inside indented, then ``}``."""
        self.line(f"{head} {{" if head else "{")
        with self.indented():
            yield
        self.line("}")

    def splice(self, other: CodeBuffer) -> None:
        """``other``'s lines at this indentation (their own indentation kept relative to it)."""
        for text in other._lines:
            self.line(text)

    def text(self) -> str:
        return "".join(f"{line}\n" for line in self._lines)


def delinear_into(code: CodeBuffer, var: str, names: list[str], shape: list[int]) -> None:
    """Statements setting the indices ``names`` (row-major over ``shape``) from the flat index ``var``."""
    rest = var
    for k in range(len(shape) - 1, -1, -1):
        if k == 0:
            code.line(f"const int64_t {names[k]} = {rest};")
        else:
            code.line(f"const int64_t {names[k]} = {rest} % {shape[k]};")
            code.line(f"const int64_t q{names[k]} = {rest} / {shape[k]};")
            rest = f"q{names[k]}"
