"""Attempts as the agents see them: a verdict turned into a ``HistoryItem``."""

from __future__ import annotations

from forge.agents import Confirmation, HistoryItem
from forge.core.acceptance import training_standing
from forge.core.candidate_config import CandidateConfig
from forge.core.figures import AttemptFigures, judged_roofline
from forge.core.statuses import AttemptStatus
from forge.core.timing_records import Timings
from forge.core.verdict import Verdict


def history_item(round: int, source: str, verdict: Verdict, config: CandidateConfig, attempt_id: int) -> HistoryItem:
    failing = verdict.first_failed_check()
    figures = AttemptFigures.of(verdict)
    roof = judged_roofline(verdict)  # judged warm, the data comes from cache: no DRAM bound
    timed = figures.timed or not verdict.timing_meaningful  # the interpreter's times still rank configs
    return HistoryItem(
        round=round,
        source=source,
        status=AttemptStatus.of(verdict.status),
        reason=verdict.reason,
        failing_check=failing.name if failing else None,
        error_text=(failing.detail if failing else None) or verdict.reason,
        max_abs_error=verdict.failing_case.max_abs if verdict.failing_case else None,
        # a busy machine's times say nothing: the agents and the tuner see none
        timings_ms=verdict.timings_ms.model_copy() if timed else Timings(),
        roofline_fraction=roof.fraction_candidate if roof is not None and figures.timed else None,
        config=config.config,
        parent_config=config.parent_config,
        attempt_id=attempt_id,
        speedup_vs_eager=figures.speedup_vs_eager,
        figures=figures if verdict.passed else None,
        training=_training(verdict),
        profile=verdict.profile if figures.timed else None,
    )


def _training(verdict: Verdict) -> str | None:
    """For a verdict that checked gradients: whether its kernel would be used under autograd, and why."""
    if not any(c.name == "gradients" for c in verdict.checks) or not verdict.passed:
        return None
    standing = training_standing(verdict)
    return ("used under autograd: " if standing.used else "not used under autograd: ") + standing.why


def invalid_item(round: int, reason: str, response: str | None, attempt_id: int | None) -> HistoryItem:
    """A reply that held no usable candidate: recorded so the coder sees why."""
    return HistoryItem(
        round=round,
        source=response or "",
        status=AttemptStatus.INVALID_REPLY,
        reason=reason,
        error_text=reason,
        attempt_id=attempt_id,
    )


def confirmation_of(verdict: Verdict, kernel_id: int | None) -> Confirmation:
    """A confirm row's verdict as the finalist's history shows it to a later round."""
    figures = AttemptFigures.of(verdict)
    loop = next((c.detail for c in verdict.checks if c.name == "user_loop" and c.passed), None)
    return Confirmation(
        held=bool(verdict.confirm_held),
        trials=verdict.confirm_trials,
        figures=figures if verdict.passed and figures.timed else None,
        user_loop=loop,
        reason=verdict.confirm_reason,
        kernel_id=kernel_id,
    )
