"""When a step's reviews stop the search: an LLM judge reviews passing attempts only, so a failed
attempt (no review) neither keeps the search going nor stops it."""

from __future__ import annotations

from forge.agents import HistoryItem, JudgeFeedback
from forge.core.statuses import AttemptStatus
from forge.harness.sessions.search import _judge_says_stop


def _item(status: AttemptStatus, go_on: bool | None) -> HistoryItem:
    feedback = None if go_on is None else JudgeFeedback(continue_search=go_on)
    return HistoryItem(1, "x = 1\n", status, feedback=feedback)


def test_a_stop_from_every_review_stops_though_a_failed_attempt_was_not_reviewed():
    assert _judge_says_stop([_item(AttemptStatus.PASSED, False), _item(AttemptStatus.FAILED_CORRECTNESS, None)])


def test_a_review_that_goes_on_or_no_review_at_all_keeps_the_search_going():
    assert not _judge_says_stop([_item(AttemptStatus.PASSED, False), _item(AttemptStatus.PASSED, True)])
    assert not _judge_says_stop([_item(AttemptStatus.FAILED_CORRECTNESS, None)])
    assert not _judge_says_stop([])
