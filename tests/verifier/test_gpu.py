"""CUDA paths: the same verifier with device=cuda (skipped without a GPU)."""

from __future__ import annotations

import pytest

from forge.verifier import verify
from tests.conftest import CANDIDATES, OPS

pytestmark = pytest.mark.gpu

SOFTMAX = OPS / "small_softmax.py"


@pytest.fixture
def cuda_settings(fast_settings):
    return fast_settings.model_copy(update={"device": "cuda"})


def test_triton_kernel_on_gpu_is_timed(cuda_settings):
    v = verify(SOFTMAX, CANDIDATES / "softmax/honest_triton.py", cuda_settings)
    assert v.status == "passed", v.reason
    assert v.device == "cuda" and v.timing_meaningful
    assert v.speedup_vs_eager is not None and v.speedup_vs_eager > 0
    launch = v.timing_stats.candidate_launch
    assert launch is not None and launch.median_ms > 0 and "launch_cost" in {c.name for c in v.checks}


def test_torch_rewrite_on_gpu(cuda_settings):
    v = verify(SOFTMAX, CANDIDATES / "softmax/honest_torch.py", cuda_settings)
    assert v.status == "passed", v.reason


def test_side_stream_work_is_refused(cuda_settings):
    """Work moved to a side stream: torch.cuda.Stream() comes from torch's pool, whose streams are
    non-blocking, so the timed stream's events never wait for it, while the host clock around the
    call and a device synchronize does. The clocks disagree (checks.wall_clock_discrepancy, or
    checks.escaped_events where the worker's own ticks wait for the device): refused."""
    v = verify(SOFTMAX, CANDIDATES / "softmax/side_stream.py", cuda_settings)
    assert v.status == "failed_integrity", (v.status, v.reason, v.timings_ms)
    assert "wall_clock" in {c.name for c in v.checks if not c.passed}, v.checks


def test_bf16_downgrade_caught_on_gpu(cuda_settings):
    v = verify(SOFTMAX, CANDIDATES / "softmax/bf16_compute.py", cuda_settings)
    assert v.status == "failed_correctness"


def test_a_triton_candidates_profile_names_its_kernel_with_its_launch(cuda_settings):
    """On a GPU the profile's rows are kernels, each with its launch as the profiler's trace has it."""
    settings = cuda_settings.model_copy(update={"profile_candidate": True})
    v = verify(SOFTMAX, CANDIDATES / "softmax/honest_triton.py", settings)
    assert v.status == "passed", v.reason
    assert v.profile is not None and v.profile.clock == "cuda", v.warnings
    launched = [op for op in v.profile.ops if op.launch]
    assert launched and all("grid " in op.launch and "block " in op.launch for op in launched), v.profile
