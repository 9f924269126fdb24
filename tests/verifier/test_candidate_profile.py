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


# two launches of one Triton kernel and a cuBLAS GEMM, as torch.profiler's Chrome trace has them (Kineto's arguments)
TRACE = {
    "traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "args": {"correlation": 7}},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "triton_red_fused_rmsnorm_0",
            "args": {
                "registers per thread": 40,
                "shared memory": 4096,
                "grid": [96, 1, 1],
                "block": [128, 1, 1],
                "est. achieved occupancy %": 12,
            },
        },
        {"cat": "kernel", "name": "triton_red_fused_rmsnorm_0", "args": {"grid": [1, 1, 1], "block": [1, 1, 1]}},
        {"ph": "X", "cat": "Kernel", "name": "sm90_xmma_gemm", "args": {"registers per thread": 168}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "args": {"bytes": 4096}},
    ]
}


def test_a_gpu_profile_row_says_each_kernels_launch_as_the_profiler_recorded_it():
    from forge.agents.llm.prompts import render
    from forge.core.op_brief import CandidateProfile
    from forge.verifier.worker.call_profile import kernel_launches, profiled_ops

    launches = kernel_launches(TRACE)
    assert launches == {
        "triton_red_fused_rmsnorm_0": "grid 96x1x1, block 128x1x1, 40 registers a thread, 4 KiB shared a block, "
        "est. occupancy 12% (the first of 2 launch shapes)",
        "sm90_xmma_gemm": "168 registers a thread",
    }
    # a trace of another shape leaves the rows without launches, never the profile lost
    odd = {"traceEvents": [{"cat": "kernel", "name": "k", "args": [1, 2]}, "x", {"cat": "kernel", "args": None}]}
    assert kernel_launches(odd) == {} and kernel_launches([]) == {} and kernel_launches({"traceEvents": 3}) == {}
    weird = {"traceEvents": [{"cat": "kernel", "name": "k", "args": {"shared memory": [4096], "grid": 7}}]}
    assert kernel_launches(weird) == {}
    rows = [("triton_red_fused_rmsnorm_0", 0.02, 1.0), ("memcpy", 0.01, 1.0)]
    ops = profiled_ops(rows, 0.04, 0.05, launches)
    assert ops[0].launch == launches["triton_red_fused_rmsnorm_0"] and ops[1].launch is None
    text = render("profile.j2", p=CandidateProfile(calls=5, ops=ops, other_share=0.25, clock="cuda"))
    assert "| triton_red_fused_rmsnorm_0 | 0.0250 | 50% | 1 | grid 96x1x1, block 128x1x1" in text
    assert text.count("|---|---|---|---|---|") == 1 and "| memcpy | 0.0125 | 25% | 1 |  |" in text
    assert "| launch |" in text and "Nsight Compute" in text
    on_cpu = render("profile.j2", p=CandidateProfile(calls=5, ops=ops, other_share=0.25, clock="cpu"))
    assert "launch" not in on_cpu
