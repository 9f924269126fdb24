"""The base layer's typed records: the verdict's JSON round trip, its leniency towards older
banks and strictness about types, and the status vocabularies."""

from __future__ import annotations

import json

import pytest

from forge.core.roofline_record import Roofline
from forge.core.statuses import AttemptStatus, SessionStatus, VerdictStatus
from forge.core.timing_records import TimingStats
from forge.core.verdict import FailingCase, Verdict


def _verdict() -> Verdict:
    v = Verdict(problem="op", candidate="c.py", device="cpu")
    v.add("correctness", True, "ok")
    v.timing_stats.candidate = TimingStats.from_ns([1_000_000, 2_000_000, 3_000_000]).rounded()
    v.timings_ms.candidate = 2.0
    v.roofline = Roofline(bytes=10, flops=0, bound_ms=1.0, fraction_candidate=0.5)
    return v


def test_a_verdict_round_trips_through_its_json():
    v = _verdict()
    data = json.loads(json.dumps(v.to_json()))
    assert Verdict.from_json(data) == v
    assert data["status"] == "passed" and data["passed"] is True and list(data)[-1] == "passed"
    assert set(data["timing_stats"]) == {"candidate"} and set(data["timings_ms"]) == {"candidate", "eager", "compile"}
    assert data["roofline"] == {"bytes": 10, "flops": 0, "bound_ms": 1.0, "fraction_candidate": 0.5}


def test_the_confirmation_fields_appear_only_when_set_and_keep_their_stored_keys():
    v = _verdict()
    assert not {"trials", "held", "why", "confirm_attempt_id", "confirmed"} & set(v.to_json())
    update = {"confirm_trials": 60, "confirm_held": True, "confirm_reason": "1.3x", "confirmed": True}
    confirmed = v.model_copy(update=update)
    data = confirmed.to_json()
    assert (data["trials"], data["held"], data["why"], data["confirmed"]) == (60, True, "1.3x", True)
    assert Verdict.from_json(data).confirm_trials == 60


def test_older_verdicts_load_and_wrong_types_are_refused():
    old = Verdict.from_json(
        {
            "status": "passed",
            "config": {"acc": "float"},
            "timing_stats": {"candidate": {"median_ms": 1.0, "iqr_ms": 0.2}},
        }
    )
    stats = old.timing_stats.candidate
    assert stats is not None and (stats.lower_ms, stats.upper_ms) == (0.9, 1.1)  # no quartiles stored: median -/+ IQR/2
    with pytest.raises(ValueError):
        Verdict.from_json({"status": "not a status"})
    with pytest.raises(ValueError):
        Verdict.from_json({"checks": "all good"})


def test_a_failing_case_without_a_result_shows_where_it_failed_only():
    raised = FailingCase(id="base/1", shape="as declared", inputs="normal").model_dump()
    assert raised == {"id": "base/1", "shape": "as declared", "inputs": "normal"}
    off = FailingCase(id="base/1", shape="s", inputs="normal", output=0, mismatch="values", max_abs=1.0).model_dump()
    assert off["mismatch"] == "values" and "max_rel" in off


def test_statuses_print_and_compare_as_their_values():
    assert f"{VerdictStatus.FAILED_CORRECTNESS}" == "failed_correctness" == VerdictStatus.FAILED_CORRECTNESS
    assert all(AttemptStatus.of(s).verified for s in VerdictStatus)  # every verdict is an attempt status
    assert not AttemptStatus.PENDING.verified and not AttemptStatus.INVALID_REPLY.verified
    assert SessionStatus.BUDGET.hit_limit and not SessionStatus.FINISHED.resumable
    assert json.dumps({"s": SessionStatus.TIME_LIMIT}) == '{"s": "time_limit"}'
