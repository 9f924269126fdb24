"""A passing candidate's profile (``profile_candidate``): where its time goes, measured in its own
worker after its timing, with the C functions it calls through ``forge.cpp`` named."""

from __future__ import annotations

from forge.verifier import verify
from tests.conftest import EXAMPLES, OPS


def test_a_cpp_candidates_verdict_says_how_much_of_its_time_its_c_function_takes(fast_settings):
    settings = fast_settings.model_copy(update={"profile_candidate": True})
    verdict = verify(OPS / "quick_rmsnorm.py", EXAMPLES / "candidates" / "rmsnorm_cpp.py", settings)
    assert verdict.passed, verdict.reason
    profile = verdict.profile
    assert profile is not None and profile.calls == 5 and profile.clock == "cpu", verdict.warnings
    rows = {op.name: op for op in profile.ops}
    kernel = rows["forge.cpp rmsnorm"]  # the candidate's own C function, named
    assert kernel.share > 0.3 and kernel.calls == 1, profile
    assert 0.0 <= profile.other_share < 1.0 and sum(op.share for op in profile.ops) <= 1.0 + 1e-3
    assert verdict.timings_ms.candidate is not None and not [w for w in verdict.warnings if "profile" in w]
    assert kernel.self_ms <= verdict.timings_ms.candidate * 1.5  # a share of its timed call
