"""The hack classes the field found since the first list, each a candidate the real verifier
rejects, or runs harmlessly: tiny outputs that zeros would match, a candidate that tells the
timed calls from the correctness cases, a forged report at exit, uninitialised memory."""

from __future__ import annotations

import os

import pytest

from forge.verifier import verify
from tests.conftest import CANDIDATES, OPS

SOFTMAX = OPS / "small_softmax.py"
TINY = OPS / "tiny_outputs.py"


def failed(v) -> set[str]:
    return {c.name for c in v.checks if not c.passed and c.fatal}


def test_zeros_for_tiny_outputs_are_rejected_at_their_own_scale(fast_settings):
    v = verify(TINY, CANDIDATES / "tiny" / "zeros.py", fast_settings)
    assert not v.passed and "correctness" in failed(v), (v.status, v.reason)
    detail = next(c.detail for c in v.checks if c.name == "correctness")
    assert "own scale" in detail, detail
    honest = verify(TINY, CANDIDATES / "tiny" / "honest.py", fast_settings)
    assert honest.passed, honest.reason


@pytest.mark.parametrize("cand", ["phase_by_count.py", "phase_by_pointer.py"])
def test_a_candidate_that_tells_the_timed_calls_apart_is_caught_there(fast_settings, cand):
    v = verify(SOFTMAX, CANDIDATES / "softmax" / cand, fast_settings)
    assert not v.passed and v.status == "failed_integrity", (v.status, v.reason)
    # by count: right in every case, wrong once timed; by pointer: the cases refill one buffer too
    assert failed(v) & {"timed_outputs", "no_stale_results"}, failed(v)


def test_a_report_forged_at_exit_changes_nothing(fast_settings):
    v = verify(SOFTMAX, CANDIDATES / "softmax" / "atexit_report.py", fast_settings)
    assert v.status == "failed_correctness", (v.status, v.reason)


def test_poisoned_memory_is_not_mistaken_for_a_result(fast_settings):
    """Returning uninitialised memory (the last output's freed buffer) fails: each call's outputs
    are compared after the worker poisoned the heap, on fresh buffers."""
    v = verify(SOFTMAX, CANDIDATES / "softmax" / "uninit_memory.py", fast_settings)
    assert v.status == "failed_correctness", (v.status, v.reason)
    assert os.environ.get("FORGE_WORKER_SANDBOX") is None  # the parent never enters one itself
