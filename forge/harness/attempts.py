"""Attempts as the agents see them: a verdict turned into a ``HistoryItem``, and a stored session
turned back into a history (for ``--resume``)."""

from __future__ import annotations

from typing import Any

from forge.agents.roles import HistoryItem, JudgeFeedback
from forge.db.sessions import StoredSession


def history_item(
    round: int,
    source: str,
    verdict: dict[str, Any],
    config: dict[str, Any] | None = None,
    parent_config: dict[str, Any] | None = None,
    attempt_id: int | None = None,
) -> HistoryItem:
    failing = next((c for c in verdict.get("checks") or [] if not c.get("passed") and c.get("fatal", True)), None)
    case = verdict.get("failing_case") or {}
    roof = verdict.get("roofline") or {}
    return HistoryItem(
        round=round,
        source=source,
        status=str(verdict.get("status", "crashed")),
        reason=verdict.get("reason"),
        failing_check=failing.get("name") if failing else None,
        error_text=(failing.get("detail") if failing else None) or verdict.get("reason"),
        max_abs_error=case.get("max_abs"),
        timings_ms=dict(verdict.get("timings_ms") or {}),
        roofline_fraction=roof.get("fraction_candidate"),
        config=config,
        parent_config=parent_config,
        attempt_id=attempt_id,
        speedup_vs_eager=verdict.get("speedup_vs_eager"),
    )


def invalid_item(round: int, reason: str, response: str | None, attempt_id: int | None) -> HistoryItem:
    """A reply that held no usable candidate: recorded so the coder sees why."""
    return HistoryItem(
        round=round,
        source=response or "",
        status="invalid_reply",
        reason=reason,
        error_text=reason,
        attempt_id=attempt_id,
    )


def restore_history(stored: StoredSession) -> tuple[list[HistoryItem], list[tuple[int, int, str, dict[str, Any]]]]:
    """(history of finished attempts, pending attempts to verify again as (id, round, source, meta))."""
    feedback: dict[int, JudgeFeedback] = {}
    for a in stored.attempts:
        if a.role == "judge" and a.parent_id is not None and a.verdict and a.verdict.get("feedback"):
            try:
                feedback[a.parent_id] = JudgeFeedback.model_validate(a.verdict["feedback"])
            except ValueError:
                continue
    history: list[HistoryItem] = []
    pending = []
    for a in stored.attempts:
        if a.role != "coder":
            continue
        meta = dict(a.verdict or {})
        if a.status == "pending" and a.source:
            pending.append((a.id, a.round, a.source, meta))
            continue
        if a.status == "invalid_reply":
            history.append(invalid_item(a.round, str(meta.get("reason", "no usable candidate")), a.response, a.id))
            continue
        item = history_item(a.round, a.source or "", meta, meta.get("config"), meta.get("parent_config"), a.id)
        item.feedback = feedback.get(a.id)
        history.append(item)
    return history, pending
