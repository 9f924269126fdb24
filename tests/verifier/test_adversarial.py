"""One candidate per fooling technique that can happen on a CPU, each rejected with its status,
and honest controls that must pass. Every test runs the real verifier: two worker processes."""

from __future__ import annotations

import os

import pytest

from forge.core.settings import ForgeSettings
from forge.verifier import Job, VerifierService, verify
from tests.conftest import CANDIDATES, OPS

SOFTMAX = OPS / "small_softmax.py"
AFFINE = OPS / "small_affine.py"


def run(cand: str, settings: ForgeSettings, op=SOFTMAX, **overrides):
    s = settings.model_copy(update=overrides) if overrides else settings
    return verify(op, CANDIDATES / cand, s)


def failed(v) -> set[str]:
    return {c.name for c in v.checks if not c.passed and c.fatal}


# -- honest controls --------------------------------------------------------------------------


def test_torch_rewrite_passes(fast_settings):
    v = run("softmax/honest_torch.py", fast_settings)
    assert v.status == "passed", v.reason
    assert v.passed and not failed(v)
    assert (v.timings_ms.candidate or 0) > 0 and (v.timings_ms.eager or 0) > 0
    assert v.speedup_vs_eager is not None and v.speedup_vs_eager > 0
    assert v.speedup_vs_compile is None  # compile baseline off
    assert len(v.shapes) >= 3  # declared plus derived small and odd variants
    assert v.cases >= 9 and v.backend == "torch"


def test_openmp_cpp_kernel_passes_and_its_pool_is_not_flagged(fast_settings):
    v = run("softmax/honest_cpp.py", fast_settings)
    assert v.status == "passed", v.reason
    assert v.backend == "cpp"
    assert next(c for c in v.checks if c.name == "no_background_threads").passed


def test_triton_kernel_under_interpreter_passes_without_speedup(fast_settings):
    pytest.importorskip("triton")
    v = run("softmax/honest_triton.py", fast_settings)
    assert v.status == "passed", v.reason
    assert v.backend == "triton"
    assert v.timing_meaningful is False
    assert v.speedup_vs_eager is None and v.speedup_vs_compile is None


@pytest.mark.slow
@pytest.mark.e2e  # a cold cpp_extension build (half a minute): in .ci/run's heavy run
def test_load_inline_kernel_passes(fast_settings):
    v = run("softmax/honest_load_inline.py", fast_settings, timeout=600)
    assert v.status == "passed", v.reason
    assert v.backend == "cpp"


def test_subclass_of_reference_with_loaded_weights_passes(fast_settings):
    v = run("affine/honest.py", fast_settings, op=AFFINE)
    assert v.status == "passed", v.reason


# -- fooling techniques -----------------------------------------------------------------------

REJECTED = [
    # (candidate, expected status, a check that must fail)
    ("softmax/uninit_memory.py", "failed_correctness", "correctness"),  # 1 uninitialised memory
    ("softmax/mutate_inputs.py", "failed_integrity", "inputs_unchanged"),  # 2 input mutation
    ("softmax/alias_output.py", "failed_integrity", "no_aliasing"),  # 3 output aliases input
    ("softmax/reused_output.py", "failed_integrity", "fresh_outputs"),  # 3 one output buffer for every call
    ("softmax/reused_output_when_timed.py", "failed_integrity", "timed_outputs"),  # the same, once timed
    ("softmax/cache_by_shape.py", "failed_integrity", "no_stale_results"),  # 4 caching on shape
    ("softmax/cache_by_pointer.py", "failed_integrity", "no_stale_results"),  # 4 caching on pointer
    ("softmax/seed42.py", "failed_correctness", "correctness"),  # 5 memorised seed
    ("softmax/hardcoded_shape.py", "runtime_error", "run"),  # 5 hard-coded shape
    ("softmax/subclass_output.py", "failed_integrity", "plain_tensor_outputs"),  # 6 lazy tensor subclass
    ("softmax/background_thread.py", "failed_integrity", "no_background_threads"),  # 6 Python thread
    ("softmax/native_thread.py", "failed_integrity", "no_background_threads"),  # 6 detached C++ thread
    ("softmax/patch_timer.py", "failed_integrity", "clock_integrity"),  # 7 time.perf_counter patched
    ("softmax/steal_clock.py", "failed_integrity", "clock_integrity"),  # 7 harness clock swapped
    ("softmax/steal_loop.py", "failed_integrity", "wall_clock"),  # 7 timing loop replaced
    ("softmax/gc_introspect.py", "failed_correctness", "correctness"),  # 8 gc.get_objects
    ("softmax/frame_inspect.py", "failed_correctness", "correctness"),  # 8 stack frames
    ("softmax/patch_torch.py", "failed_correctness", "correctness"),  # 9 torch monkey-patched
    ("softmax/bf16_compute.py", "failed_correctness", "correctness"),  # 10 precision downgrade
    ("softmax/wrong_dtype.py", "failed_correctness", "correctness"),  # 10 output dtype
    ("softmax/tuple_output.py", "failed_correctness", "correctness"),  # output structure
    ("softmax/naive_softmax.py", "failed_correctness", "stress"),  # 11 numerically fragile
    ("softmax/drops_specials.py", "failed_correctness", "stress"),  # 11 NaN/inf not propagated
    ("softmax/exit_zero.py", "crashed", "worker"),  # 13 os._exit(0)
    ("softmax/sys_exit.py", "crashed", "worker"),  # 13 sys.exit(0)
    ("softmax/segfault.py", "crashed", "worker"),  # abnormal ending
    ("softmax/fake_report.py", "failed_correctness", "correctness"),  # 13 fake printed report
    ("softmax/forge_channel.py", "crashed", "worker"),  # 13 forged frames on forge's own channel
    ("affine/ignores_weights.py", "failed_correctness", "correctness"),  # 5 weights not used
    ("affine/training_only.py", "failed_integrity", "runs_kernel"),  # the reference runs in eval mode
    ("affine/reference_inside.py", "failed_integrity", "runs_kernel"),  # the reference called inside
]


@pytest.mark.parametrize(("cand", "status", "check"), REJECTED, ids=[r[0].split("/")[1][:-3] for r in REJECTED])
def test_fooling_technique_is_rejected(fast_settings, cand, status, check):
    op = AFFINE if cand.startswith("affine/") else SOFTMAX
    v = run(cand, fast_settings, op=op)
    assert v.status == status, (v.status, v.reason)
    assert not v.passed
    assert check in failed(v), (check, failed(v))
    assert v.reason


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin the reference to one")
def test_a_candidate_that_pins_the_reference_to_one_core_is_caught(fast_settings, tmp_path):
    """os.sched_setaffinity on the reference worker's threads (same user, ids in /proc) would time
    eager on half the machine: the parent's guard sees it and fails the verdict, and a session's
    next verification gets a new reference worker, not the pinned one. Unsandboxed: the guard is
    the second line of defence (``test_sandbox`` has the first: /proc is out of reach)."""
    with VerifierService(SOFTMAX, fast_settings.model_copy(update={"sandbox": False}), "cpu") as service:
        v = service.verify_alone(Job("pin", (CANDIDATES / "softmax/pin_reference.py").read_text()), 10, 120)
        assert v.status == "failed_integrity" and "reference_untouched" in failed(v), (v.status, v.reason)
        assert "CPU affinity" in (v.reason or "") and "->" in (v.reason or "")
        honest = service.verify_alone(Job("honest", (CANDIDATES / "softmax/honest_torch.py").read_text()), 10, 120)
    assert honest.passed, honest.reason
    assert any(c.name == "reference_untouched" and c.passed for c in honest.checks)


def test_naive_softmax_passes_ordinary_inputs_but_not_stress(fast_settings):
    v = run("softmax/naive_softmax.py", fast_settings)
    assert next(c for c in v.checks if c.name == "correctness").passed
    assert v.failing_case is not None and v.failing_case.inputs != "normal"


def test_fake_report_is_captured_not_believed(fast_settings):
    v = run("softmax/fake_report.py", fast_settings)
    assert '"passed": true' in v.candidate_output and "PASSED" in v.candidate_output
    assert v.status == "failed_correctness"


def test_infinite_loop_times_out(fast_settings):
    v = run("softmax/infinite_loop.py", fast_settings, timeout=8)
    assert v.status == "timeout"
    assert any(c.name == "load" and c.passed for c in v.checks), v.checks  # the loop ran: not a slow start
    assert "time limit" in (v.reason or "")


def test_memory_hog_is_stopped_by_the_memory_limit(fast_settings):
    v = run("softmax/memory_hog.py", fast_settings, memory_limit_mb=1536)
    assert v.status == "crashed"
    assert "memory" in (v.reason or "").lower()


def test_first_failing_case_is_named_with_errors(fast_settings):
    v = run("softmax/bf16_compute.py", fast_settings)
    case = v.failing_case
    assert case is not None and case.id.startswith("base/")
    assert case.mismatch == "values" and case.inputs == "normal"
    assert (case.max_abs or 0) > 1e-4 and (case.max_rel or 0) > 0


NEAR_TIE = OPS / "near_tie_attention.py"


def test_a_candidate_nearer_exact_than_an_ill_conditioned_reference_passes_its_stress_cases(fast_settings):
    # On large inputs the float32 reference splits each near-tied pair's weight on its logits'
    # last bits: a candidate computing in float64 differs from it by 0.5 where the stress atol
    # is 0.01, and is judged against the reference run in float64 instead
    v = run("near_tie/float64_inside.py", fast_settings, op=NEAR_TIE)
    assert v.status == "passed", v.reason
    assert next(c for c in v.checks if c.name == "stress").passed


def test_beside_the_float64_reference_a_precision_downgrade_still_fails_its_stress_cases(fast_settings):
    v = run("near_tie/bf16_logits.py", fast_settings, op=NEAR_TIE)
    assert v.status == "failed_correctness"
    stress = next(c for c in v.checks if c.name == "stress")
    assert not stress.passed and "float64 reference" in stress.detail
