"""The rivals' side of paired timing: a round's other candidates, each in its own worker, called
in the same batches as the candidate (``PairedTimer``'s ``rivals``, ``pairing.side_orders``).

A rival is untrusted code like the candidate, and nothing it does may cost the candidate its
verdict: each request to one has a limit of its own (``RIVAL_CALL_S``, within the verification's),
and a rival that raises, sends something malformed, dies or overruns is killed and dropped from
the rest of the timing (``failed`` says why), while the others go on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TypeVar

from forge.verifier.parent.timing.timed_replies import CandidateFailed, candidate_said, timed_call
from forge.verifier.processes.worker_process import WorkerGone, WorkerProcess
from forge.verifier.protocol import Message

R = TypeVar("R", bound=Message)
RIVAL_CALL_S = 30.0  # the longest a rival may take over one request before it is dropped

__all__ = ["RIVAL_CALL_S", "CandidateFailed", "RivalSides"]


class RivalSides:
    """Rival ``j`` is ``workers[j]``; ``failed[j]`` why one was dropped."""

    def __init__(
        self, workers: Sequence[WorkerProcess], deadline: float, failed: Mapping[int, str] | None = None
    ) -> None:
        self.workers = list(workers)
        self.deadline = deadline
        self.failed: dict[int, str] = dict(failed or {})

    def live(self) -> list[int]:
        return [j for j in range(len(self.workers)) if j not in self.failed]

    def _limit(self) -> float:
        return min(self.deadline, time.monotonic() + RIVAL_CALL_S)

    def ask_all(self, request: Message, expect: type[R]) -> dict[int, R]:
        """``request`` to every live rival, and each one's reply."""
        replies: dict[int, R] = {}
        for j in self.live():
            said = self._guarded(j, partial(self._asked, self.workers[j], request, expect))
            if said is not None:
                replies[j] = said
        return replies

    def _asked(self, worker: WorkerProcess, request: Message, expect: type[R]) -> R:
        worker.send(request)
        reply, _ = worker.recv(self._limit())
        return candidate_said(reply, expect)

    def call(self, j: int, i: int, ticks: list[float]) -> None:
        """Rival ``j``'s timed call ``i`` of a batch (the ticks it sends while it runs into ``ticks``)."""
        if j in self.failed:
            return
        self._guarded(j, partial(timed_call, self.workers[j], i, self._limit(), ticks))

    def _guarded(self, j: int, ask: Callable[[], R]) -> R | None:
        """``ask`` of rival ``j``; its error, death or overrun drops it."""
        try:
            return ask()
        except CandidateFailed as exc:
            lines = exc.reply.message.strip().splitlines()
            self.failed[j] = f"raised: {lines[-1] if lines else exc.reply.stage}"[:300]
        except WorkerGone as exc:
            self.failed[j] = f"its worker ended: {exc.ending.detail}"[:300]
        self.workers[j].kill()
        return None
