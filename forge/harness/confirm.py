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
    from forge.settings import ForgeSettings

FINALISTS = 2  # contenders timed again before a session gives up on banking a kernel
_CHOICE_KEYS = ("config", "parent_config", "kernel_config")  # what the attempt's own verdict records


@dataclass
class Contender:
    attempt_id: int
    source: str
    verdict: dict[str, Any]
    config: dict[str, Any]  # what is banked with the kernel: the config less inert knobs


def finalists(contenders: list[Contender], n: int = FINALISTS, keep: Contender | None = None) -> list[Contender]:
    """The ``n`` fastest contenders by their round's median speedup vs eager, one per distinct
    source (the tuner can reach one kernel through two configs). ``keep`` (the fastest that beat
    eager beyond the noise in its own round) takes the last place if the medians left it out:
    two noisy attempts with higher medians must not push out the one measured clearly faster."""
    ranked = sorted(contenders, key=lambda c: -(c.verdict.get("speedup_vs_eager") or 0.0))
    out: list[Contender] = []
    for c in ranked:
        if len(out) < n and all(f.source != c.source for f in out):
            out.append(c)
    if keep is not None and n > 0 and all(f.source != keep.source for f in out):
        out = [*out[: n - 1], keep]
    return out


def confirm_timeout(settings: ForgeSettings, c: Contender, trials: int) -> float:
    """Seconds a confirmation may take: the usual limit plus three times its timed calls at the
    speed its round measured (eager, torch.compile and the candidate each take ``trials`` calls),
    so 60 calls of a slow op are not cut short by a limit meant for a round's 5-30."""
    per_call_s = sum(float(t or 0.0) for t in (c.verdict.get("timings_ms") or {}).values()) / 1000 + 0.01
    return settings.timeout + 3 * trials * per_call_s


def confirm_finalists(session: Session, reason: str | None) -> tuple[Contender | None, str | None]:
    """(the finalist to bank, with its confirmation verdict, or None; the reason when None). Each
    confirmation is recorded as an attempt of role ``confirm`` whose parent is the finalist."""
    settings = session.settings
    trials = max(settings.confirm_trials, settings.timing_trials or 0)
    why_not = []
    for c in finalists(session.contenders, keep=session.best):
        if session.limits.stop_requested.is_set():
            raise KeyboardInterrupt
        session.emit(ev.ConfirmStarted, attempt_id=c.attempt_id, trials=trials)
        verdict = session.verify_alone(c.attempt_id, c.source, trials, confirm_timeout(settings, c, trials))
        ok, why = beats_eager(verdict)
        if verdict.get("status") != "passed" and verdict.get("reason"):
            why = f"{why}: {verdict['reason']}"
        cid = rows.add_attempt(
            session.engine, session.id, session.round, role="confirm", parent_id=c.attempt_id,
            backend=verdict.get("backend"),
        )  # fmt: skip
        rows.finish_attempt(session.engine, cid, {**verdict, "held": ok, "why": why, "trials": trials})
        session.emit(
            ev.ConfirmFinished, attempt_id=c.attempt_id, confirm_id=cid, held=ok, reason=why,
            speedup_vs_eager=verdict.get("speedup_vs_eager"), speedup_vs_compile=verdict.get("speedup_vs_compile"),
        )  # fmt: skip
        if ok:
            chosen = {k: c.verdict[k] for k in _CHOICE_KEYS if k in c.verdict}
            return replace(c, verdict={**verdict, **chosen, "confirm_attempt_id": cid}), None
        session.rejected.add(c.attempt_id)
        why_not.append(f"attempt {c.attempt_id}: {why}")
    if why_not:
        told = f"timed again ({trials} calls a side), no finalist held up: " + "; ".join(why_not)
        return None, f"{reason}; {told}" if reason else told
    return None, reason
