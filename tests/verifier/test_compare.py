"""Output comparison and the parent's judgement of worker observations (pure logic)."""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from forge.verifier.parent import checks
from forge.verifier.parent.checks import DrawnCase
from forge.verifier.parent.compare import compare, constant_would_pass, tolerance
from forge.verifier.protocol import CaseDataReply, CaseDescriptor, CaseFacts, CaseResultReply, InputShape, PartnerCase
from forge.verifier.worker import candidate_side


def test_dtype_aware_tolerance():
    assert tolerance(torch.float32, None) == (1e-4, 1e-4)
    assert tolerance(torch.float16, None) == (1e-2, 1e-2)
    assert tolerance(torch.bfloat16, None) == (1e-2, 1e-2)
    assert tolerance(torch.float32, {"atol": 1e-3, "rtol": 0.0}) == (1e-3, 0.0)


def test_within_and_outside_tolerance():
    r = torch.randn(1000)
    assert compare([r], [r + 5e-5], None, "cpu") is None
    m = compare([r], [r + 1e-3], None, "cpu")
    assert m is not None and m.kind == "values" and m.max_abs is not None and m.max_abs > 9e-4


def test_nan_and_inf_positions_are_the_spec():
    r = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert compare([r], [r.clone()], None, "cpu") is None
    assert compare([r], [torch.tensor([1.0, 0.0, float("inf"), -float("inf")])], None, "cpu").kind == "nan"
    assert compare([r], [torch.tensor([1.0, float("nan"), float("inf"), float("inf")])], None, "cpu").kind == "inf"
    assert (
        compare([r], [torch.tensor([float("nan"), float("nan"), float("inf"), -float("inf")])], None, "cpu").kind
        == "nan"
    )


def test_structure_checks():
    r = torch.randn(4, 4)
    assert compare([r], [r, r], None, "cpu").kind == "count"
    assert compare([r], [r.double()], None, "cpu").kind == "dtype"
    assert compare([r], [r.reshape(16)], None, "cpu").kind == "shape"
    assert compare([r], [r], ["meta"], "cpu").kind == "device"
    assert compare([r], [None], None, "cpu").kind == "missing"


def test_integer_outputs_must_match_exactly():
    r = torch.arange(10)
    assert compare([r], [r.clone()], None, "cpu") is None
    assert compare([r], [r + 1], None, "cpu").kind == "values"


def test_half_precision_tolerance_applies():
    r = torch.randn(1000, dtype=torch.float16)
    assert compare([r], [(r.float() * (1 + 4e-3)).half()], None, "cpu") is None


def test_stress_atol_scales_with_output_magnitude():
    r = torch.randn(1000) * 1e4
    noisy = r + torch.randn(1000) * 0.3  # ordinary reordering error at this magnitude
    noisy[0] = r[0] + 0.5
    r[0] = 1e-3
    noisy[0] = 0.3
    assert compare([r], [noisy], None, "cpu", scale_atol=False) is not None
    assert compare([r], [noisy], None, "cpu", scale_atol=True) is None


def test_degenerate_problem_detected():
    zeros = [[torch.zeros(8)], [torch.zeros(8)]]
    assert constant_would_pass(zeros, None) == "zeros"
    varied = [[torch.randn(8)], [torch.randn(8)]]
    assert constant_would_pass(varied, None) is None


def test_wall_clock_discrepancy():
    reported = [1_000_000] * 10  # 1 ms each
    honest_ticks = []
    t = 0
    for r in reported:
        honest_ticks += [t, t + r + 50_000]
        t += 5_000_000
    assert checks.wall_clock_discrepancy(honest_ticks, reported) is None
    slow_ticks = []
    for k in range(10):
        slow_ticks += [k * 100_000_000, k * 100_000_000 + 30_000_000]  # really 30 ms each
    assert "parent's clock saw" in checks.wall_clock_discrepancy(slow_ticks, reported)
    assert "ticks" in checks.wall_clock_discrepancy(honest_ticks[:-2], reported)


def _case(kind="normal", expected=None, partner=None):
    plan = CaseDescriptor(
        id="base/0:normal:0",
        model="base/0",
        kind=kind,
        shape="base",
        specs=[InputShape(shape=[3], dtype="float32")],
        input_bytes=12,
    )
    data = CaseDataReply(id=plan.id, inputs=[torch.zeros(3)], expected=expected or [torch.ones(3)], partner=partner)
    return DrawnCase(plan, data)


def _facts(**over):
    facts = {
        "layout": "tensor",
        "types": ["torch.Tensor"],
        "plain": [True],
        "storage_ok": [True],
        "devices": ["cpu"],
        "aliases": [[]],
        "busy_python_threads": [],
        "new_native_threads": 0,
        "call_index": 2,
        "reference_calls": 0,
        "inputs_modified": [],
        "changed_after_return": [],
        "clock_tampering": [],
    }
    facts.update(over)
    return CaseFacts(**facts)


def _result(outputs, outputs2, facts=None, refill=None):
    return CaseResultReply(
        id="base/0:normal:0", outputs=outputs, outputs2=outputs2, outputs_refill=refill, facts=facts or _facts()
    )


def test_check_case_clean():
    out = checks.check_case(_case(), _result([torch.ones(3)], [torch.ones(3)]), "cpu", None)
    assert out.correctness is None and out.determinism is None and out.integrity == {}


def test_check_case_integrity_findings():
    facts = _facts(
        plain=[False],
        aliases=[[0]],
        inputs_modified=[0],
        changed_after_return=[0],
        busy_python_threads=["Thread-1"],
        clock_tampering=["time.perf_counter"],
    )
    out = checks.check_case(_case(), _result([torch.ones(3)], [torch.ones(3)], facts), "cpu", None)
    assert set(out.integrity) == {
        "plain_tensor_outputs",
        "no_aliasing",
        "inputs_unchanged",
        "no_lazy_outputs",
        "no_background_threads",
        "clock_integrity",
    }


def test_native_threads_allowed_only_on_first_call():
    res = [torch.ones(3)], [torch.ones(3)]
    first = checks.check_case(_case(), _result(*res, _facts(new_native_threads=2, call_index=0)), "cpu", None)
    facts = _facts(new_native_threads=1, new_thread_names=["subproc_worker"], call_index=4)
    later = checks.check_case(_case(), _result(*res, facts), "cpu", None)
    assert "no_background_threads" not in first.integrity
    assert "(subproc_worker)" in later.integrity["no_background_threads"]  # named, for whoever reads why


def test_a_threads_name_is_read_from_the_kernel():
    ready, done = threading.Event(), threading.Event()
    before = candidate_side.native_threads()
    worker = threading.Thread(target=lambda: (ready.set(), done.wait()))
    worker.start()
    ready.wait()
    try:
        (new,) = candidate_side.native_threads() - before
        assert candidate_side.thread_names([new]) == [Path(f"/proc/self/task/{new}/comm").read_text().strip()]
        assert candidate_side.thread_names([2**30]) == []  # one that ended meanwhile: left out
    finally:
        done.set()
        worker.join()


def test_nondeterminism_found():
    out = checks.check_case(_case(), _result([torch.ones(3)], [torch.ones(3) * 2]), "cpu", None)
    assert out.determinism is not None and "second call" in out.determinism.detail


def test_backend_detection():
    assert checks.detect_backend("import triton\n@triton.jit\ndef k(): pass") == "triton"
    assert checks.detect_backend("load_inline(name, cpp_sources=s, cuda_sources=c)") == "cuda"
    assert checks.detect_backend("load_inline(name, cpp_sources=s)") == "cpp"
    assert checks.detect_backend("from forge import cpp") == "cpp"
    assert checks.detect_backend("torch.softmax(x)") == "torch"


def test_side_stream_escape_detection():
    events = [50_000] * 10  # 50 us by the stream's events
    assert checks.escaped_events(events, [120_000] * 10) is None  # launch overhead: fine
    assert "side streams" in checks.escaped_events(events, [3_000_000] * 10)


def test_wall_clock_tolerates_scheduling_outliers():
    reported = [20_000] * 20  # 20 us kernels
    ticks = []
    for k, r in enumerate(reported):
        delay = 8_000_000 if k % 5 == 0 else 40_000  # every fifth wake-up is 8 ms late
        ticks += [k * 10_000_000, k * 10_000_000 + r + delay]
    assert checks.wall_clock_discrepancy(ticks, reported) is None


def test_refill_miss_is_caching_only_when_the_old_result_comes_back():
    old, new = torch.ones(3), torch.full((3,), 2.0)
    partner = PartnerCase(id="p", kind="normal", inputs=[torch.zeros(3)], expected=[new])
    case = _case(expected=[old], partner=partner)
    stale = checks.check_case(case, _result([old], [old], refill=[old.clone()]), "cpu", None)
    assert "no_stale_results" in stale.integrity and stale.correctness is None
    sloppy = checks.check_case(case, _result([old], [old], refill=[new + 0.01]), "cpu", None)
    assert "no_stale_results" not in sloppy.integrity
    assert sloppy.correctness is not None and "new values" in sloppy.correctness.detail
    good = checks.check_case(case, _result([old], [old], refill=[new.clone()]), "cpu", None)
    assert good.correctness is None and good.integrity == {}


def test_specials_stress_sprinkles_nan_and_inf_into_float_inputs_only():
    from forge.verifier.worker.cases import stress_inputs

    x, idx = torch.randn(64, 256), torch.arange(10)
    sx, sidx = stress_inputs([x, idx], "specials", seed=3)
    n = x.numel() // 4096
    assert int(torch.isnan(sx).sum()) >= 1 and int(torch.isposinf(sx).sum()) >= 1 and int(torch.isneginf(sx).sum()) >= 1
    assert int((~torch.isfinite(sx)).sum()) <= n  # sparse: most rows stay ordinary
    assert torch.equal(sx[torch.isfinite(sx)], x[torch.isfinite(sx)]) and torch.equal(sidx, idx)
    assert torch.isfinite(x).all()  # the draw itself is not modified
    again, _ = stress_inputs([x, idx], "specials", seed=3)
    assert torch.equal(torch.isnan(again), torch.isnan(sx))  # seeded
    (tiny,) = stress_inputs([torch.randn(5)], "specials", seed=1)
    assert int((~torch.isfinite(tiny)).sum()) >= 1


def _ill_conditioned(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Softmax-weighted sums over logits of 1e4 plus an ordinary spread, in float32, in float64,
    and in float32 with the logits summed in another order: the logits' last bits (1e-3 at 1e4)
    move every weight by about 0.1%."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(64, 32, generator=g, dtype=torch.float64) for _ in range(3))
    q[:, 0], k[:, 0], v = 100.0, 100.0, v * 100
    exact = torch.softmax(q @ k.t(), -1) @ v
    qf, kf, vf = q.float(), k.float(), v.float()
    ref = torch.softmax(qf @ kf.t(), -1) @ vf
    halves = qf[:, 16:] @ kf[:, 16:].t() + qf[:, :16] @ kf[:, :16].t()
    return ref, exact, torch.softmax(halves, -1) @ vf


def test_a_stress_candidate_as_close_to_the_exact_outputs_as_the_reference_passes():
    for seed in range(5):
        ref, exact, other = _ill_conditioned(seed)
        # the two orders disagree beyond the stress tolerance
        assert compare([ref], [other], None, "cpu", scale_atol=True) is not None
        assert compare([ref], [other], None, "cpu", scale_atol=True, exact=[exact]) is None
        # float64 inside, rounded once: nearer the exact outputs than the reference itself
        assert compare([ref], [exact.float()], None, "cpu", scale_atol=True, exact=[exact]) is None


def test_beside_the_exact_outputs_a_precision_downgrade_and_a_wrong_result_still_fail():
    ref, exact, _ = _ill_conditioned(0)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(64, 32, generator=g) for _ in range(3))
    q[:, 0], k[:, 0], v = 100.0, 100.0, v * 100
    in_bf16 = torch.softmax((q.bfloat16() @ k.bfloat16().t()).float(), -1) @ v  # logits in bfloat16
    in_fp16 = torch.softmax((q.half().float() @ k.half().float().t()), -1) @ v  # inputs rounded to float16
    own = float((ref.double() - exact).abs().max())
    offset = ref + 1.5 * own  # off everywhere by 1.5x the reference's worst error
    for bad in (in_bf16, in_fp16, offset, ref * 1.01, ref.flip(0)):
        m = compare([ref], [bad], None, "cpu", scale_atol=True, exact=[exact])
        assert m is not None and m.kind == "values"
        assert "float64 reference" in m.detail


def test_exact_outputs_far_from_the_reference_are_not_trusted():
    r = torch.randn(500) * 100  # a float64 run that is another computation (a random op)
    other = torch.randn(500) * 100
    m = compare([r], [r + 1.0], None, "cpu", scale_atol=True, exact=[other.double()])
    assert m is not None and "float64 reference" in m.detail


def test_beside_the_exact_outputs_nan_and_inf_positions_must_still_match():
    ref, exact, other = _ill_conditioned(1)
    ref[0, 0], exact[0, 0], other[0, 0] = float("nan"), float("nan"), float("nan")
    ref[1, 1], exact[1, 1], other[1, 1] = float("inf"), float("inf"), float("inf")
    assert compare([ref], [other], None, "cpu", scale_atol=True, exact=[exact]) is None
    lost = other.clone()
    lost[1, 1] = 3.0e38  # an inf turned into a number
    m = compare([ref], [lost], None, "cpu", scale_atol=True, exact=[exact])
    assert m is not None and m.kind == "inf"


def test_tiny_outputs_are_compared_at_their_own_scale():
    g = torch.Generator().manual_seed(0)
    tiny = torch.randn(64, 64, generator=g) * 1e-5
    zeros = compare([tiny], [torch.zeros_like(tiny)], None, "")
    assert zeros is not None and "own scale" in zeros.detail  # within atol=1e-4 element by element
    assert compare([tiny], [tiny * 0.5], None, "") is not None
    # an honest float32 result that cancels: tiny values from operands of about 1
    a = torch.rand(64, 64, generator=g, dtype=torch.float64) + 1
    exact = (a + tiny.double()) - a
    assert compare([exact.float()], [((a.float() + tiny) - a.float())], None, "") is None
    # a tolerance the op declares is taken as it is, and outputs of ordinary size are untouched
    assert compare([tiny], [torch.zeros_like(tiny)], None, "", {"atol": 1e-4, "rtol": 1e-4}) is None
    assert compare([tiny * 1e5], [tiny * 1e5 + 5e-5], None, "") is None


def test_the_one_pass_closeness_agrees_with_isclose_and_leaves_nan_and_inf_to_it():
    """Every timed call's outputs are compared: the one-reduction test decides "all close" only
    where isclose would, and says no (isclose then decides) wherever a NaN or an inf is met."""
    from forge.verifier.parent.compare import _all_close_and_finite

    torch.manual_seed(0)
    r = torch.randn(4096)
    atol, rtol = 1e-5, 1.3e-6
    at_edge = r + (atol + rtol * r.abs())  # each element at isclose's bound (rounding puts some past it)
    near = r + 0.9 * (atol + rtol * r.abs())
    for c in (r.clone(), r + 1e-7, near, at_edge, r + 1e-3, r.flip(0)):
        assert _all_close_and_finite(c, r, rtol, atol) == bool(torch.isclose(c, r, rtol, atol).all())
    assert _all_close_and_finite(near, r, rtol, atol) and not _all_close_and_finite(r + 1e-3, r, rtol, atol)
    for special in (float("nan"), float("inf")):
        both = r.clone()
        both[7] = special
        assert not _all_close_and_finite(both, both.clone(), rtol, atol)  # isclose decides (equal_nan: close)
        assert bool(torch.isclose(both, both.clone(), rtol, atol, equal_nan=True).all())
    assert _all_close_and_finite(torch.empty(0), torch.empty(0), rtol, atol)


def test_complex_outputs_are_compared_in_both_parts():
    """A complex output cast to a real dtype would keep its real part alone: a wrong imaginary part must fail."""
    r = torch.complex(torch.randn(64), torch.randn(64))
    wrong = torch.complex(r.real, r.imag + 1.0)
    m = compare([r], [wrong], None, "")
    assert m is not None and m.kind == "values", m
    assert compare([r], [r.clone()], None, "") is None
    assert compare([r], [r.conj()], None, "") is not None  # a conjugate differs in its imaginary part
