"""``--resume``: a stored session's options, op file and search state, read back from the bank."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from pydantic import ValidationError

from forge.core.choices import Strategy
from forge.core.errors import BankError, ForgeError, UsageError
from forge.core.feedback import JudgeFeedback
from forge.core.statuses import AttemptRole, AttemptStatus, VerdictStatus
from forge.core.verdict import Verdict
from forge.db import StoredSession
from forge.harness.runs.limits import Spend
from forge.harness.runs.options import OptimizeOptions, StoredOptions
from forge.harness.sessions.attempts import confirmation_of, history_item, invalid_item
from forge.harness.sessions.search_state import SearchState
from forge.harness.sessions.steps import Candidate


def resumed_options(stored: StoredSession, given: OptimizeOptions) -> tuple[OptimizeOptions, Path]:
    """The stored session's options (this run's ``rounds`` replacing the stored count when given),
    and its op file: where it was, or rewritten from the bank if it moved or changed."""
    if stored.strategy == Strategy.PARALLEL:
        raise UsageError(
            f"session {stored.id} is a parallel-plan session: resume it with `forge plan --resume {stored.id}`"
        )
    try:
        saved = StoredOptions.read(stored.settings)
    except ValidationError as exc:
        raise BankError(f"session {stored.id}'s stored settings cannot be read ({exc.errors()[0]['msg']})") from exc
    more_rounds = given.rounds is not None and given.rounds > saved.round_limit
    if not stored.status.resumable and not more_rounds and given.bank_attempt is None:
        raise ForgeError(
            f"session {stored.id} already finished its {saved.round_limit} rounds; continue it with more "
            f"(`--resume {stored.id} --rounds {saved.round_limit + 4}`) or start a new one with `forge optimize OP.py`"
        )
    path = Path(saved.op_path)
    if not (path.is_file() and path.read_text() == stored.problem_source):
        path = Path(tempfile.mkdtemp(prefix="forge-resume-")) / f"{stored.problem_name}.py"
        atexit.register(shutil.rmtree, path.parent, True)  # the bank keeps the source; the copy is the run's
        path.write_text(stored.problem_source)
    return saved.resumed(given), path


def restore_state(stored: StoredSession) -> tuple[SearchState, Spend]:
    """The search as the stored session left it: its history (with the judge's feedback), the
    attempts a killed run left unverified, its contenders, its round, and what it spent."""
    feedback: dict[int, JudgeFeedback] = {
        a.parent_id: a.feedback
        for a in stored.attempts
        if a.role is AttemptRole.JUDGE and a.parent_id is not None and a.feedback is not None
    }
    # a finalist's newest confirmation, and the kernel banked from it: what a later round measures against
    confirmations = {
        a.parent_id: confirmation_of(a.verdict, stored.banked.get(a.parent_id))
        for a in stored.attempts
        if a.role is AttemptRole.CONFIRM and a.parent_id is not None and a.verdict is not None
    }
    state = SearchState(round=max((a.round for a in stored.attempts), default=0))
    for a in stored.attempts:
        if a.role is not AttemptRole.CODER:
            continue
        if a.status is AttemptStatus.PENDING and a.source:
            state.pending.append(Candidate(a.id, a.round, a.source, a.config))
        elif a.status is AttemptStatus.PENDING:  # no source to verify: it cannot have run
            state.add(history_item(a.round, "", Verdict(status=VerdictStatus.CRASHED), a.config, a.id))
        elif a.status is AttemptStatus.INVALID_REPLY:
            state.add(invalid_item(a.round, a.reason or "no usable candidate", a.response, a.id))
        elif a.verdict is not None:
            item = history_item(a.round, a.source or "", a.verdict, a.config, a.id)
            item.feedback = feedback.get(a.id)
            item.confirmation = confirmations.get(a.id)
            state.add(item)
            state.consider(a.id, a.source or "", a.verdict, a.config)
    # A session whose calls had no known price stored no cost: it stays unknown, never $0.
    known = stored.cost_usd is not None or stored.tokens == 0
    return state, Spend(tokens=stored.tokens, cost_usd=stored.cost_usd or 0.0, cost_known=known)
