"""The session's last step: time its finalists again before one is banked.

Picking the fastest of many noisy timings favours whichever attempt was measured luckiest, and a
round's 5-30 timed calls leave quartiles too coarse to separate a real 10% gain from the noise.
So the fastest contenders (passed, faster than eager at the median) are verified again, one at a
time on the whole machine, with ``confirm_trials`` calls a side on fresh inputs, and the first
that beats eager beyond the noise in that second measurement is banked with it: the speedup a
session reports was measured after the choice, not the draw that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from forge.db import sessions as rows
from forge.harness import events as ev
from forge.harness.limits import beats_eager

if TYPE_CHECKING:
    from forge.harness.session import Session

FINALISTS = 2  # contenders timed again before a session gives up on banking a kernel
_CHOICE_KEYS = ("config", "parent_config", "kernel_config")  # what the attempt's own verdict records


@dataclass
class Contender:
    attempt_id: int
    source: str
    verdict: dict[str, Any]
    config: dict[str, Any]  # what is banked with the kernel: the config less inert knobs


def finalists(contenders: list[Contender], n: int = FINALISTS) -> list[Contender]:
    """The ``n`` fastest contenders by their round's median speedup vs eager, one per distinct
    source (the tuner can reach one kernel through two configs)."""
    ranked = sorted(contenders, key=lambda c: -(c.verdict.get("speedup_vs_eager") or 0.0))
    out: list[Contender] = []
    for c in ranked:
        if len(out) < n and all(f.source != c.source for f in out):
            out.append(c)
    return out


def confirm_finalists(session: Session, reason: str | None) -> tuple[Contender | None, str | None]:
    """(the finalist to bank, with its confirmation verdict, or None; the reason when None). Each
    confirmation is recorded as an attempt of role ``confirm`` whose parent is the finalist."""
    trials = max(session.settings.confirm_trials, session.settings.timing_trials or 0)
    why_not = []
    for c in finalists(session.contenders):
        session.emit(ev.ConfirmStarted, attempt_id=c.attempt_id, trials=trials)
        verdict = session.verify_alone(c.attempt_id, c.source, trials)
        ok, why = beats_eager(verdict)
        cid = rows.add_attempt(
            session.engine, session.id, session.round, role="confirm", parent_id=c.attempt_id,
            backend=verdict.get("backend"), status=verdict.get("status") or "failed",
            verdict={**verdict, "held": ok, "why": why, "trials": trials},
        )  # fmt: skip
        session.emit(
            ev.ConfirmFinished, attempt_id=c.attempt_id, confirm_id=cid, held=ok, reason=why,
            speedup_vs_eager=verdict.get("speedup_vs_eager"), speedup_vs_compile=verdict.get("speedup_vs_compile"),
        )  # fmt: skip
        if ok:
            chosen = {k: c.verdict[k] for k in _CHOICE_KEYS if k in c.verdict}
            return replace(c, verdict={**verdict, **chosen, "confirm_attempt_id": cid}), None
        why_not.append(f"attempt {c.attempt_id}: {why}")
    if why_not:
        return None, f"timed again ({trials} calls a side), no finalist held up: " + "; ".join(why_not)
    return None, reason
