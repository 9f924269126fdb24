"""Two user-loop processes taking turns: one with the candidate imported, one without it.

Eager read slower once the candidate was imported than before, in one process: the candidate
slowed it, or the machine's load changed between the two loops (a neighbour on a 2-core CI VM
read an honest op 2x slower, in two fresh processes one after the other). The two cannot be told
apart by loops that run one after the other, so the second reading is taken by two processes
that run at once and take turns: a block of a few rounds in one, then a block in the other, a
byte on a pipe handing the turn over. Whatever load the machine has lands on both, and only what
the candidate does to its own process reads as eager slower there. The process without the
candidate waits (on a read) while the other runs, so neither times the other's work."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from forge.verifier.protocol import Turns

BLOCK_ROUNDS = 5  # rounds a side in one turn: short, so load that comes and goes lands on both processes
MIN_BLOCKS = 8
OTHER_ENDED = "the other process of the pair ended before its turns were done"


class OtherProcessEnded(RuntimeError):
    """The other process of the pair closed its end before the turns were done."""


def turn_blocks(rounds: int) -> int:
    """Turns each process takes for a loop of ``rounds`` rounds (at least as many calls a side)."""
    return max(MIN_BLOCKS, -(-rounds // BLOCK_ROUNDS))


class TurnTaker:
    """One process's end of the pair: ``wait`` for the turn, ``give`` it back."""

    def __init__(self, turns: Turns) -> None:
        self.turns = turns

    def wait(self) -> None:
        if not os.read(self.turns.read_fd, 1):
            raise OtherProcessEnded(OTHER_ENDED)

    def give(self) -> None:
        with contextlib.suppress(BrokenPipeError):  # its last turn: the other may have ended
            os.write(self.turns.write_fd, b"t")

    def blocks(self, run_block: Callable[[], list[int]]) -> list[int]:
        """Eager's per-call nanoseconds over this process's turns; ``run_block`` times one turn."""
        eager: list[int] = []
        for _ in range(self.turns.blocks):
            self.wait()
            eager += run_block()
            self.give()
        return eager


__all__ = ["BLOCK_ROUNDS", "MIN_BLOCKS", "OTHER_ENDED", "OtherProcessEnded", "TurnTaker", "turn_blocks"]
