"""Run-wide limits (budget, time), each op's fair share of them (and what its confirmation will
take of it), a session's own spending, and Ctrl-C as a clean stop."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from forge.core.figures import fmt_seconds
from forge.core.statuses import SessionStatus
from forge.verifier import stop_all_workers


@dataclass
class Limits:
    """Shared by every session of one ``forge optimize`` run (several ops share one budget)."""

    budget_usd: float | None = None
    time_limit_s: float | None = None
    started: float = field(default_factory=time.monotonic)
    tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: bool = False  # some call's price was unknown: the sum is a lower bound
    stop_requested: threading.Event = field(default_factory=threading.Event)
    # the shares of the sessions running now (side by side on a cluster), until ``release``
    _running: dict[int, OpShare] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def share(
        self,
        ops_left: int,
        at_once: int = 1,
        spent_before: float | None = None,
        weight: float = 1.0,
        weight_left: float | None = None,
    ) -> OpShare:
        """The next op's part of what is left: an equal part for each op not yet done (this one
        included), or with ``weight`` (its share of a model's time, say) its weight's part of
        ``weight_left``, the weights of the ops not yet opened, its own included. Taken when its
        session opens, so an op that ends early leaves what it did not use to the ops after it,
        and one whose confirmation ran over leaves them less (within a time limit each still gets
        its first round: ``harness.sessions.search``).

        With ``at_once`` sessions side by side (a cluster) the time left is theirs together: of
        ``at_once`` slots of it (never more slots than sessions), what the running sessions' shares
        still hold is theirs, and the rest is split among the ops not yet opened (8 ops, 2 at a time,
        300 s: 75 s each, whenever each opens). The budget is spent by all of them: each op's part
        of what is left when it opens, by its weight as for time.
        ``spent_before``: the session's own spending so far (a resumed one's), counted against its
        budget share from there; ``release`` the share when the session ends."""
        n = max(1, ops_left)
        part = 1.0 / n if weight_left is None or weight_left <= 0 else min(1.0, max(0.0, weight) / weight_left)
        left_s = self.remaining_s()
        left_usd = None if self.budget_usd is None else max(0.0, self.budget_usd - self.cost_usd)
        with self._lock:
            running = list(self._running.values())
            held = sum(r.time_left() or 0.0 for r in running)
            slots = min(max(1, at_once), n + len(running))
            share = OpShare(
                time_s=None if left_s is None else max(0.0, min(left_s, (left_s * slots - held) * part)),
                budget_usd=None if left_usd is None else left_usd * part,
                ops_left=n,
                spent_before=self.cost_usd if spent_before is None else spent_before,
            )
            self._running[id(share)] = share
        return share

    def release(self, share: OpShare | None) -> None:
        """The session holding ``share`` ended: what it did not use is free for the ops after it."""
        if share is not None:
            with self._lock:
                self._running.pop(id(share), None)

    def charge(self, tokens: int, cost_usd: float | None, known: bool = True) -> None:
        with self._lock:  # sessions side by side charge from their own threads
            self.tokens += tokens
            if cost_usd is not None:
                self.cost_usd += cost_usd
            if not known:
                self.cost_unknown = True

    def exceeded(self) -> SessionStatus | None:
        """BUDGET or TIME_LIMIT when a limit is reached, else None."""
        if self.budget_usd is not None and self.cost_usd >= self.budget_usd:
            return SessionStatus.BUDGET
        if self.time_limit_s is not None and time.monotonic() - self.started >= self.time_limit_s:
            return SessionStatus.TIME_LIMIT
        return None

    def remaining_s(self) -> float | None:
        if self.time_limit_s is None:
            return None
        return max(0.0, self.time_limit_s - (time.monotonic() - self.started))

    @property
    def cost_reported(self) -> float | None:
        """The total, or None when a price was unknown and nothing was priced at all."""
        return None if self.cost_unknown and self.cost_usd == 0 else round(self.cost_usd, 6)


@dataclass(frozen=True)
class OpShare:
    """One op's share of a batch's limits (``Limits.share``): the seconds and dollars its search
    may use, counted from when its session opened. Without it, ``forge optimize OPS...
    --time-limit 300`` let the first ops use the whole limit and the rest end with no attempt."""

    time_s: float | None
    budget_usd: float | None
    ops_left: int  # the ops it was shared among, this one included
    spent_before: float = 0.0  # what had been spent when the session opened (see ``exceeded``)
    started: float = field(default_factory=time.monotonic)

    def time_left(self) -> float | None:
        return None if self.time_s is None else max(0.0, self.time_s - (time.monotonic() - self.started))

    def exceeded(
        self, limits: Limits, spent_now: float | None = None, reserve_s: float = 0.0
    ) -> tuple[SessionStatus, str] | None:
        """BUDGET or TIME_LIMIT, and which share ("its share of the time limit (37 s of ...)"),
        when this op's share is used up, else None. ``spent_now``: the session's own spending (its
        share counts only what it spent itself); None: the run's (sessions one at a time).
        ``reserve_s``: seconds of its share kept for what follows its search (confirming its
        finalists), so that its end does not eat into the shares of the ops after it."""
        of = f" of what was left for {self.ops_left} ops" if self.ops_left > 1 else ""
        spent = (limits.cost_usd if spent_now is None else spent_now) - self.spent_before
        if self.budget_usd is not None and spent >= self.budget_usd:
            return SessionStatus.BUDGET, f"its share of the budget (${self.budget_usd:.4f}{of})"
        if self.time_s is not None and time.monotonic() - self.started + reserve_s >= self.time_s:
            kept = f", {fmt_seconds(reserve_s)} of it kept to confirm its finalists" if reserve_s > 0 else ""
            return SessionStatus.TIME_LIMIT, f"its share of the time limit ({fmt_seconds(self.time_s)}{of}{kept})"
        return None


# A session's confirmation, in rounds of its search: two finalists timed again with more calls,
# and the null control beside them (what a time limit keeps back for it: ``RoundClock.reserve_s``)
CONFIRM_ROUNDS = 2.0


@dataclass
class RoundClock:
    """A session's rounds in this run (a resumed session's earlier ones not counted): how many
    began, and how long the longest took, from which what confirming its finalists will take is
    expected."""

    began: int = 0
    longest_s: float = 0.0
    _last: float | None = None

    def round_began(self) -> None:
        """A round begins: the one before it (if any) took from its start until now."""
        now = time.monotonic()
        if self._last is not None:
            self.longest_s = max(self.longest_s, now - self._last)
        self._last, self.began = now, self.began + 1

    def reserve_s(self) -> float:
        """Seconds of the op's share kept back for its confirmation: CONFIRM_ROUNDS of its longest
        round so far, the one ending now included."""
        ending = time.monotonic() - self._last if self._last is not None else 0.0
        return CONFIRM_ROUNDS * max(self.longest_s, ending)


@dataclass
class Spend:
    """What one session's LLM calls cost: its own totals (the run's are in ``Limits``)."""

    tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True  # every call had a price

    def add(self, tokens: int, cost_usd: float | None, known: bool) -> None:
        self.tokens += tokens
        self.cost_usd += cost_usd or 0.0
        self.cost_known &= known

    @property
    def cost_reported(self) -> float | None:
        """The total, or None when some call's price was unknown."""
        return round(self.cost_usd, 6) if self.cost_known else None


@contextlib.contextmanager
def ctrl_c_stops(limits: Limits) -> Iterator[None]:
    """Ctrl-C ends the run cleanly even when it lands where Python swallows the KeyboardInterrupt.

    A SIGINT that arrives while a worker is being forked raises inside an at-fork hook, where the
    exception is printed and dropped. So the signal also sets ``stop_requested`` (checked after
    every verification and before every round) and ends the running workers at once.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        limits.stop_requested.set()
        stop_all_workers()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
