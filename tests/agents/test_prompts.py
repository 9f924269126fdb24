"""Prompt templates render with everything the issue asks of them, and history carries verdicts."""

from __future__ import annotations

from dataclasses import replace

from forge.agents.llm.agents import LLMCoder, LLMJudge
from forge.agents.llm.client import Completion
from forge.agents.llm.prompts import (
    FittedSource,
    category,
    change_from_previous,
    fit_source,
    op_shown,
    source_limit,
    standing,
)
from forge.agents.roles import CoderContext, HistoryItem, JudgeFeedback, MachineFacts
from forge.core.figures import AttemptFigures, judged_roofline
from forge.core.op_brief import CompiledBaseline, OpBrief
from forge.core.roofline_record import Roofline
from forge.core.statuses import AttemptStatus
from forge.core.timing_records import Timings
from forge.core.verdict import Verdict
from forge.verifier.briefing.inductor_code import condensed_cpp, trim_output_code
from tests.conftest import EXAMPLES


class FakeClient:
    model = "fake/model"

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.seen: list[list[dict[str, str]]] = []

    def complete(self, messages, max_tokens=None, retries=4, on_text=None):
        self.seen.append(messages)
        return Completion(self.replies.pop(0), 10, 0.001, True)


def _ctx(history=None, backend="cpp", device="cpu") -> CoderContext:
    src = (EXAMPLES / "ops" / "softmax.py").read_text()
    facts = MachineFacts(device, cpu_model="AMD EPYC", cores=2, isa=["avx2", "fma"], bandwidth_gbs=20.5)
    return CoderContext("softmax", src, device, backend, facts, history or [])


def test_coder_prompt_has_source_contract_device_example_and_history():
    item = HistoryItem(
        round=1,
        source="class ModelNew: pass",
        status=AttemptStatus.FAILED_CORRECTNESS,
        reason="stress: case base/1",
        failing_check="stress",
        error_text="output 0: 12 of 100 elements outside atol",
        max_abs_error=0.5,
        timings_ms=Timings(candidate=None),
        feedback=JudgeFeedback(diagnosis="NaN handling", next_step="use a NaN-aware max"),
    )
    coder = LLMCoder(FakeClient(["```python\nclass ModelNew(Model):\n    pass\n```"]))  # type: ignore[arg-type]
    text = coder.prompt(_ctx([item]))[-1]["content"]
    for needed in (
        "torch.softmax(x, dim=1)",
        "class ModelNew(Model)",
        "state_dict",
        "OpenMP",
        "avx2",
        "bandwidth_gbs",
        "cpp.load",
        "failed_correctness",
        "stress",
        "0.5",
        "use a NaN-aware max",
        "class ModelNew: pass",
    ):
        assert needed in text, needed
    (proposal,) = coder.propose(_ctx())
    assert proposal.source and proposal.tokens == 10 and proposal.cost_usd == 0.001


def test_the_contract_names_the_shapes_the_brief_says_are_verified():
    coder = LLMCoder(FakeClient([]))  # type: ignore[arg-type]
    fixed = OpBrief(device="cpu", regime="cold")
    varied = OpBrief(device="cpu", regime="cold", shape_variants=["rows=32, cols=128"])
    contract = [
        coder.prompt(replace(_ctx(), brief=b))[-1]["content"].split("- It is verified on", 1)[1]
        for b in (fixed, varied)
    ]
    assert contract[0].startswith(
        " fresh random inputs and weights, on the op's own shapes (it declares no shape variants)"
    )
    assert contract[1].startswith(" fresh random inputs and weights, on other shapes than the ones in `get_inputs`")
    assert "rows=32, cols=128" in contract[1] and "rows=32, cols=128" not in contract[0]


def test_triton_prompt_and_category_examples():
    coder = LLMCoder(FakeClient([]))  # type: ignore[arg-type]
    text = coder.prompt(_ctx(backend="triton", device="cuda"))[-1]["content"]
    assert "num_warps" in text and "@triton.jit" in text
    assert category("return torch.softmax(x, dim=1)") == "rowwise"
    assert category("return torch.relu(x * 2)") == "pointwise"


def test_judge_retries_once_then_goes_on_without_feedback():
    item = HistoryItem(round=1, source="src", status=AttemptStatus.PASSED, timings_ms=Timings(candidate=1.0))
    verdict = Verdict.from_json({"status": "passed", "reason": None, "checks": [], "timings_ms": {"candidate": 1.0}})
    client = FakeClient(["no json here", '{"next_step": "tile it", "continue": false}'])
    review = LLMJudge(client).review(_with_parent(_ctx([item]), item), verdict)  # type: ignore[arg-type]
    assert review.feedback is not None and review.feedback.next_step == "tile it"
    assert not review.feedback.continue_search and review.tokens == 20 and len(client.seen) == 2
    bad = LLMJudge(FakeClient(["nope", "still nope"]))  # type: ignore[arg-type]
    review = bad.review(_with_parent(_ctx([item]), item), verdict)
    assert review.feedback is None and "unusable twice" in (review.error or "")


def _with_parent(ctx: CoderContext, item: HistoryItem) -> CoderContext:
    ctx.parent = item
    return ctx


def test_the_judge_is_told_the_sessions_backend_and_its_tuning_vocabulary():
    item = HistoryItem(round=1, source="src", status=AttemptStatus.PASSED, timings_ms=Timings(candidate=1.0))
    verdict = Verdict.from_json({"status": "passed", "reason": None, "checks": [], "timings_ms": {"candidate": 1.0}})
    seen = {}
    for backend, device in (("cpp", "cpu"), ("triton", "cuda"), ("cuda", "cuda")):
        client = FakeClient(['{"next_step": "tile it", "continue": false}'])
        LLMJudge(client).review(_with_parent(_ctx([item], backend, device), item), verdict)  # type: ignore[arg-type]
        seen[backend] = "\n".join(m["content"] for m in client.seen[0])
    cpu = seen["cpp"]
    assert "CPU kernels written in C++ with OpenMP" in cpu and "prefetch distance" in cpu
    assert not any(gpu in cpu for gpu in ("BLOCK", "num_warps", "GPU", "shared-memory")), cpu
    assert "GPU kernels written in Triton" in seen["triton"] and "num_warps" in seen["triton"]
    assert "CUDA C++" in seen["cuda"] and "threads per block" in seen["cuda"] and "num_warps" not in seen["cuda"]


def test_attempts_are_numbered_as_the_bank_numbers_them():
    older = HistoryItem(round=1, source="a", status=AttemptStatus.FAILED_CORRECTNESS, attempt_id=7)
    newer = HistoryItem(
        round=2, source="b", status=AttemptStatus.PASSED, timings_ms=Timings(candidate=1.0), attempt_id=9
    )
    coder = LLMCoder(FakeClient([]))  # type: ignore[arg-type]
    text = coder.prompt(_ctx([older, newer]))[-1]["content"]
    assert "Attempt 7 (round 1)" in text and "Attempt 9 (round 2)" in text and "Attempt 1 " not in text
    verdict = Verdict.from_json({"status": "passed", "reason": None, "checks": [], "timings_ms": {"candidate": 1.0}})
    client = FakeClient(['{"next_step": "tile it", "continue": false}'])
    LLMJudge(client).review(_with_parent(_ctx([older, newer]), newer), verdict)  # type: ignore[arg-type]
    judged = client.seen[0][-1]["content"]
    assert "## Candidate (attempt 9, round 2; attempt ids are the bank's rows" in judged
    assert "- attempt 7, round 1: failed_correctness" in judged


def test_a_source_fits_whole_or_is_cut_around_the_line_the_error_names():
    source = "\n".join(f"line {i:04d} " + "x" * 40 for i in range(1, 1001))  # 51k characters
    assert fit_source(source, 60_000) == FittedSource(source)
    cut = fit_source(source, 12_000, 'File "attempt_3.py", line 700, in forward')
    assert cut.cut and "1000 lines" in cut.note and "lines 660-739 around the error" in cut.note
    assert "line 0001 " in cut.text and "line 0700 " in cut.text and "line 0800 " not in cut.text
    assert "left out" in cut.text and len(cut.text) <= 12_000
    head = fit_source(source, 12_000)
    assert head.cut and "cut to its first" in head.note and "line 0001 " in head.text and "line 0700 " not in head.text
    assert source_limit("openai/no-such-model") == 24_576  # a quarter of an assumed 32k-token context


def test_the_prompts_say_stop_near_the_roofline_only_where_the_bound_holds():
    v = Verdict.from_json(
        {
            "status": "passed",
            "timings_ms": {"candidate": 1.0},
            "timing_stats": {"paired_eager": {"pairs": 20, "median": 1.3, "low": 1.2, "high": 1.4}, "regime": "cold"},
        }
    )
    figures = AttemptFigures.of(v)
    near = HistoryItem(1, "src", AttemptStatus.PASSED, attempt_id=5, figures=figures, roofline_fraction=0.9)
    said = standing([near], None)
    assert said is not None and "Attempt 5 already runs at 90%" in said and '"continue": false' in said
    far = HistoryItem(1, "src", AttemptStatus.PASSED, attempt_id=5, figures=figures, roofline_fraction=0.4)
    assert standing([far], None) is None
    # near the bound but not clear of the noise (its interval reaches 1.0x): no kernel to bank, no stop
    unclear = Verdict.from_json(
        {**v.to_json(), "timing_stats": {"paired_eager": {"pairs": 12, "median": 1.21, "low": 0.92, "high": 1.62}}}
    )
    noisy = HistoryItem(
        1, "s", AttemptStatus.PASSED, attempt_id=2, figures=AttemptFigures.of(unclear), roofline_fraction=0.96
    )
    said = standing([noisy], None)
    assert said is not None and "does not count yet" in said and '"continue": false' not in said, said
    warm = Verdict.from_json(
        {
            **v.to_json(),
            "timing_stats": {**v.timing_stats.model_dump(), "regime": "warm"},
            "roofline": {"bound_ms": 1.0, "fraction_candidate": 0.9},
        }
    )
    assert judged_roofline(warm) is None  # judged warm with DRAM's bound only: the data comes from cache
    cached = HistoryItem(1, "src", AttemptStatus.PASSED, attempt_id=5, figures=AttemptFigures.of(warm))
    assert standing([cached], None) is None  # so the attempt carries no roofline share to stop on
    brief = OpBrief(device="cpu", regime="cold", roofline=Roofline(bound_ms=1.0, fraction_eager=0.85))
    eager_said = standing([], brief)
    assert eager_said is not None and "Eager already runs at 85%" in eager_said and "1.18x" in eager_said
    warm_dram = OpBrief(device="cpu", regime="warm", roofline=Roofline(bound_ms=1.0, fraction_eager=0.85))
    assert standing([], warm_dram) is None
    warm_cache = OpBrief(device="cpu", regime="warm", roofline=Roofline(bound_ms=1.0, fraction_eager=0.85))
    assert warm_cache.roofline is not None
    warm_cache.roofline.level = "cache"  # the bound from the last-level cache's bandwidth holds there
    assert standing([], warm_cache) is not None


def test_a_busy_verdict_has_no_speedup_in_any_view():
    load = {"cores": 2, "other_cores": 0.93, "busy": True, "detail": "other processes used 0.93 of 2 cores"}
    paired = {"pairs": 20, "median": 2.5, "low": 2.2, "high": 2.8}
    v = Verdict.from_json(
        {
            "status": "passed",
            "timings_ms": {"candidate": 1.0},
            "speedup_vs_eager": 2.5,
            "timing_stats": {"paired_eager": paired, "contention": load},
        }
    )
    figures = AttemptFigures.of(v)
    assert not figures.timed and figures.speedup_vs_eager is None
    said = "not timed: the machine was busy (other processes used 0.93 of 2 cores); no speedup is known"
    assert figures.sentence() == said


def test_inductor_code_is_trimmed_to_its_kernels_and_call():
    code = "\n".join(
        [
            "import torch",
            "from torch._inductor.async_compile import AsyncCompile",
            "async_compile = AsyncCompile()",
            "cpp_fused_0 = async_compile.cpp_pybinding(['float*'], r'''",
            'extern "C" void kernel(float* x) {',
            "}",
            "''')",
            "async_compile.wait(globals())",
            "def call(args):",
            "    arg0_1, = args",
            "    args.clear()",
            "    assert_size_stride(arg0_1, (8, ), (1, ))",
            "    cpp_fused_0(arg0_1)",
            "    return (arg0_1, )",
            "def benchmark_compiled_module(args, times=10, repeat=10):",
            "    pass",
        ]
    )
    trimmed = trim_output_code(code)
    assert 'extern "C" void kernel' in trimmed and "cpp_fused_0(arg0_1)" in trimmed
    assert "import torch" not in trimmed and "benchmark_compiled_module" not in trimmed
    assert "assert_size_stride" not in trimmed and "args.clear" not in trimmed
    long = trim_output_code(code.replace("}", "}\n" + "// padding\n" * 2000), limit=3000)
    assert "cpp_fused_0(arg0_1)" in long and "more characters of Inductor's code left out" in long


def test_inductor_cpp_is_condensed_to_the_same_loops_and_arithmetic():
    kernel = "\n".join(
        [
            "cpp_fused_0 = async_compile.cpp_pybinding(['float*'], r'''",
            'extern "C" void kernel(float* out_ptr0)',
            "{",
            "    std::atomic<int> inductor_cpu_integer_div_error{0};",
            "    #pragma omp parallel",
            "    {",
            "        int tid = omp_get_thread_num();",
            "        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(4096L);"
            " x0+=static_cast<int64_t>(16L))",
            "        {",
            "            if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(4096L)))",
            "            {",
            "                auto tmp0 = static_cast<float>(1024.0);",
            "                out_ptr0[static_cast<int64_t>(x0 + 8L*(static_cast<int64_t>(x0) / 2L))] = tmp0;",
            "            }",
            "        }",
            "    }",
            "}",
            "''')",
        ]
    )
    short = trim_output_code(kernel + "\ndef call(args):\n    cpp_fused_0(buf0)\n")
    assert "for(int64_t x0=0; x0<4096; x0+=16)" in short
    assert "if(C10_LIKELY(x0 >= 0 && x0 < 4096))" in short  # a guard is kept: it bounds a tail
    assert "out_ptr0[(x0 + 8*(x0 / 2))] = tmp0;" in short and "static_cast<float>(1024.0)" in short
    assert "static_cast<int64_t>" not in short and "omp_get_thread_num" not in short
    assert "integer_div_error" not in short and not [ln for ln in short.splitlines() if ln.strip() in ("{", "}")]
    assert "    #pragma omp parallel\n        for(" in short  # the nesting is in the indentation
    reduction = condensed_cpp(
        "    int tid = omp_get_thread_num();\n    tmp_acc0_arr[tid] = tmp_acc0_local;\n"
        "    auto tmp1 = static_cast<int64_t>(0);\n    auto tmp2 = static_cast<int64_t>(std::floor(tmp3)) / 2L;"
    )
    assert "int tid = omp_get_thread_num();" in reduction  # read by the per-thread accumulators: kept
    assert "auto tmp1 = static_cast<int64_t>(0);" in reduction  # it types tmp1
    assert "static_cast<int64_t>(std::floor(tmp3)) / 2;" in reduction  # it converts


def test_the_judge_sees_what_changed_and_the_advice_it_gave():
    older = HistoryItem(
        round=1,
        source="a = 1\nb = 2\nc = 3\n",
        status=AttemptStatus.PASSED,
        attempt_id=3,
        feedback=JudgeFeedback(next_step="unroll the inner loop by 4"),
    )
    newer = HistoryItem(round=2, source="a = 1\nb = 4\nc = 3\n", status=AttemptStatus.PASSED, attempt_id=5)
    change = change_from_previous([older, newer], newer)
    assert change is not None and change.parent_id == 3 and "-b = 2" in change.diff and "+b = 4" in change.diff
    assert change_from_previous([older], older) is None  # a first attempt has nothing to compare with
    verdict = Verdict.from_json({"status": "passed", "reason": None, "checks": [], "timings_ms": {"candidate": 1.0}})
    client = FakeClient(['{"next_step": "tile it", "continue": false}'])
    LLMJudge(client).review(_with_parent(_ctx([older, newer]), newer), verdict)  # type: ignore[arg-type]
    judged = client.seen[0][-1]["content"]
    assert "What changed from the previous attempt (3)" in judged and "+b = 4" in judged
    assert "the advice you gave then: unroll the inner loop by 4" in judged


def test_only_a_training_session_asks_for_the_backward():
    coder = LLMCoder(FakeClient([]))  # type: ignore[arg-type]
    inference = coder.prompt(_ctx())[-1]["content"]
    training = coder.prompt(replace(_ctx(), train=True))[-1]["content"]
    assert "write the backward too" not in inference
    assert "write the backward too" in training and "create_graph=True" in training
    assert "register_fake" in training and "opcheck" in training


def test_everything_the_judge_said_reaches_the_coder():
    review = JudgeFeedback(
        diagnosis="",
        bottleneck="the second pass re-reads x from memory",
        next_step="fuse the two passes",
        config={"threads": 2, "tile": 256},
    )
    item = HistoryItem(
        round=1, source="src", status=AttemptStatus.PASSED, timings_ms=Timings(candidate=1.0), feedback=review
    )
    text = LLMCoder(FakeClient([])).prompt(_ctx([item]))[-1]["content"]  # type: ignore[arg-type]
    assert "bottleneck: the second pass re-reads x from memory" in text, text
    assert "next step: fuse the two passes" in text
    assert 'settings it proposed: {"threads": 2, "tile": 256}' in text


def test_the_last_rounds_judge_is_asked_for_a_verdict_only():
    item = HistoryItem(round=3, source="src", status=AttemptStatus.PASSED, timings_ms=Timings(candidate=1.0))
    verdict = Verdict.from_json({"status": "passed", "reason": None, "checks": [], "timings_ms": {"candidate": 1.0}})
    asked = {}
    for rounds in (3, 5):
        ctx = _with_parent(_ctx([item]), item)
        ctx.round, ctx.rounds = 3, rounds
        client = FakeClient(['{"bottleneck": "memory", "continue": false}'])
        review = LLMJudge(client).review(ctx, verdict)  # type: ignore[arg-type]
        assert review.feedback is not None and review.feedback.bottleneck == "memory"
        asked[rounds] = client.seen[0][-1]["content"]
    last, middle = asked[3], asked[5]
    assert "the last of 3: no candidate follows it, so give your verdict only" in last
    assert '"next_step"' not in last and '"config"' not in last
    assert '"next_step"' in middle and '"config"' in middle and "round 3 of at most 5" in middle


def test_a_speedup_within_the_noise_says_it_does_not_count_yet():
    def verdict(low: float, median: float) -> Verdict:
        stats = {
            "candidate": {"median_ms": 1.0, "q1_ms": 0.95, "q3_ms": 1.05, "trials": 20},
            "eager": {"median_ms": median, "q1_ms": median * 0.97, "q3_ms": median * 1.03, "trials": 20},
            "paired_eager": {"pairs": 20, "median": median, "low": low, "high": median + 0.1},
            "regime": "cold",
        }
        return Verdict.from_json({"status": "passed", "timings_ms": {"candidate": 1.0}, "timing_stats": stats})

    counts = AttemptFigures.of(verdict(1.4, 1.5)).standing
    assert counts is not None and counts.startswith("it counts: faster than eager beyond the noise"), counts
    noise = AttemptFigures.of(verdict(0.95, 1.1)).standing
    assert noise is not None and "does not count yet" in noise and "the interval reaches 1.0x" in noise, noise
    assert "keeps it a contender" in noise
    slower = AttemptFigures.of(verdict(0.8, 0.9)).standing
    assert slower == "it does not count: it is not faster than eager"
    item = HistoryItem(1, "src", AttemptStatus.PASSED, attempt_id=5, figures=AttemptFigures.of(verdict(0.95, 1.1)))
    text = LLMCoder(FakeClient([])).prompt(_ctx([item]))[-1]["content"]  # type: ignore[arg-type]
    assert "- standing: it does not count yet" in text
    client = FakeClient(['{"next_step": "tile it", "continue": true}'])
    LLMJudge(client).review(_with_parent(_ctx([item]), item), verdict(0.95, 1.1))  # type: ignore[arg-type]
    assert "- standing: it does not count yet" in client.seen[0][-1]["content"]


def test_the_brief_speaks_of_the_op_it_is_about():
    """No stock wording that does not fit: an op without weights is not told its weights are
    perturbed; an integer target is said to stay as drawn under stress; transcendental work is
    counted where matmul FLOPs are zero."""
    roof = Roofline(bytes=33_600_000, flops=0, transcendentals=8_400_000, bandwidth_gbs=20.0, peak_gflops=200.0)
    roof.bound_ms = 1.68
    no_weights = OpBrief(device="cpu", regime="cold", roofline=roof, weights=0, integer_inputs=[1])
    ctx = _ctx()
    ctx.brief = no_weights
    text = LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"]  # type: ignore[arg-type]
    assert "(the op has no weights)" in text and "weights perturbed" not in text
    assert "for floating-point inputs only (get_inputs()[1]: integer, as drawn in every case)" in text
    assert "8.40 M transcendental functions" in text and "GFLOP of matmul" not in text  # 0 FLOPs: not shown
    assert "reading alone" not in text  # no read bandwidth measured (an older forge's figures)
    roof.bytes_read, roof.read_bandwidth_gbs = 33_000_000, 41.5
    text = LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"]  # type: ignore[arg-type]
    assert "one call moves 33.60 MB (33.00 MB of it read)" in text
    assert "20.0 GB/s for a copy, its reads and writes counted, and 41.5 GB/s reading alone" in text
    ctx.brief = OpBrief(device="cpu", weights=1024)
    text = LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"]  # type: ignore[arg-type]
    assert "the weights (1024 elements) perturbed away from their initial values" in text
    assert "floating-point inputs only;" in text and "keep the values the constructor" not in text
    # a buffer (class weights) is loaded as the constructor made it: said, with what a checkpoint may hold
    ctx.brief = OpBrief(device="cpu", weights=0, buffers=["weight (1000 elements)"])
    text = LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"]  # type: ignore[arg-type]
    said = "(the op has no weights); the buffers weight (1000 elements) keep the values the constructor gives them"
    assert said in text and "never bake them in" in text


def test_the_cpp_helpers_contract_is_written_out():
    text = LLMCoder(FakeClient([])).prompt(_ctx())[-1]["content"]  # type: ignore[arg-type]
    for said in (
        "the C signature is not read; each Python argument is converted by its type",
        "a Python int `int64_t`, a bool `int`, a float `double`",
        "a function returns nothing to Python",
        "restype=ctypes.c_double",
        "raises `forge.cpp.CompileError`",
        "run under `torch.no_grad()`, as inference does",
        "streaming stores (`_mm512_stream_ps`",
    ):
        assert said in text, said


def test_the_wider_vectors_are_named_on_an_avx512_cpu_only():
    hint = '#pragma GCC target("prefer-vector-width=512")'
    coder = LLMCoder(FakeClient([]))  # type: ignore[arg-type]
    assert hint not in coder.prompt(_ctx())[-1]["content"]  # AVX2 only
    ctx = _ctx()
    ctx.machine = MachineFacts("cpu", cpu_model="Xeon", cores=2, isa=["avx2", "fma", "avx512f"])
    assert hint in coder.prompt(ctx)[-1]["content"]


def test_both_prompts_show_where_a_candidates_time_goes():
    from forge.core.op_brief import CandidateProfile, ProfiledOp

    profile = CandidateProfile(
        calls=5,
        ops=[
            ProfiledOp(name="forge.cpp rowsum", self_ms=0.61, share=0.76, calls=1),
            ProfiledOp(name="aten::empty", self_ms=0.02, share=0.03, calls=1),
        ],
        other_share=0.21,
    )
    stats = {"paired_eager": {"pairs": 20, "median": 1.5, "low": 1.4, "high": 1.6}, "regime": "cold"}
    verdict = Verdict.from_json({"status": "passed", "timings_ms": {"candidate": 0.8}, "timing_stats": stats})
    verdict.profile = profile
    item = HistoryItem(
        1, "src", AttemptStatus.PASSED, attempt_id=5, figures=AttemptFigures.of(verdict), profile=profile
    )
    coder_text = LLMCoder(FakeClient([])).prompt(_ctx([item]))[-1]["content"]  # type: ignore[arg-type]
    client = FakeClient(['{"next_step": "tile it", "continue": true}'])
    LLMJudge(client).review(_with_parent(_ctx([item]), item), verdict)  # type: ignore[arg-type]
    for text in (coder_text, client.seen[0][-1]["content"]):
        assert "where its time goes (5 calls under torch.profiler" in text, text
        assert "| forge.cpp rowsum | 0.6100 | 76% | 1 |" in text
        assert "| (in no row: Python, and native code that names nothing) | | 21% | |" in text
        assert 'make it an `extern "C"` function of its own' in text


def test_a_warm_ops_brief_gives_the_bound_at_its_own_working_set():
    roof = Roofline(bytes=4_000_000, bandwidth_gbs=20.0, peak_gflops=200.0, bound_ms=0.04, fraction_eager=0.3)
    roof.cache_bandwidth_gbs, roof.cache_bound_ms, roof.level = 100.0, 0.04, "cache"
    roof.cache_working_set = 2 << 20
    ctx = _ctx()
    ctx.brief = OpBrief(device="cpu", regime="warm", roofline=roof)
    text = LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"]  # type: ignore[arg-type]
    said = (
        "its data comes from cache: at this machine's measured 100.0 GB/s for a copy of 2 MiB kept in cache "
        "(the largest measured not above this op's 4.00 MB)"
    )
    assert said in text
    assert "(DRAM: 20.0 GB/s)" in text and "(measured in-cache bandwidth)" in text
    assert "this bound from DRAM bandwidth does not limit it" not in text


def test_each_verdict_states_its_own_eager_and_the_scale_to_the_briefs():
    """The brief's eager (a plain loop, caches not flushed) and a verdict's eager (its own pairs)
    are different measurements: each verdict says its own and how far the brief's is from it."""
    from forge.core.op_brief import EagerProfile

    stats = {"paired_eager": {"pairs": 20, "median": 1.5, "low": 1.4, "high": 1.6}, "regime": "cold"}
    verdict = Verdict.from_json(
        {"status": "passed", "timings_ms": {"candidate": 1.0, "eager": 1.5}, "timing_stats": stats}
    )
    figures = AttemptFigures.of(verdict)
    assert figures.eager_ms == 1.5
    item = HistoryItem(1, "src", AttemptStatus.PASSED, attempt_id=5, figures=figures)
    ctx = _with_parent(_ctx([item]), item)
    ctx.brief = OpBrief(device="cpu", eager=EagerProfile(median_ms=3.0, calls=21))
    client = FakeClient(['{"next_step": "tile it", "continue": true}'])
    LLMJudge(client).review(ctx, verdict)  # type: ignore[arg-type]
    coder_text = LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"]  # type: ignore[arg-type]
    for text in (client.seen[0][-1]["content"], coder_text):
        assert "- baseline: eager took 1.5000 ms a call in these pairs (cold median)" in text, text
        assert "the brief's eager, 3.0000 ms (a plain loop of calls, caches not flushed), is 2.00x that" in text
    ctx.brief = OpBrief(device="cpu", eager=EagerProfile(median_ms=3.0, calls=21, regime="warm"))
    text = LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"]  # type: ignore[arg-type]
    said = "the brief's eager, 3.0000 ms (the same trial in the warm regime, one process, no other side's calls between"
    assert said in text, text


def test_a_carved_op_of_many_instances_is_shown_with_its_table_cut_short():
    """An op standing for a model's 80 layers lists each in its file; the prompts show the first
    three and the last, and say how many they left out, where the file itself keeps them all."""
    import ast

    from forge.harness.model_run.carve import op_source
    from forge.harness.model_run.choose import choose_classes
    from tests.harness.test_model_choose import _cls, _inst, _profile

    layers = [_inst(f"layers.{i}", args=["8", str(i)]) for i in range(80)]
    profile = _profile(_cls("Layer", 0.8, *layers))
    (choice,) = choose_classes(profile, "toy")
    source = op_source(choice.groups[0], profile)
    assert all(f"'layers.{i}': " in source for i in range(80))
    ctx = replace(_ctx(), op_name="toy_Layer", op_source=source)
    item = HistoryItem(round=1, source="src", status=AttemptStatus.PASSED, timings_ms=Timings(candidate=1.0))
    judge = FakeClient(['{"next_step": "tile it", "continue": false}'])
    LLMJudge(judge).review(_with_parent(ctx, item), Verdict())  # type: ignore[arg-type]
    for text in (LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"], judge.seen[0][-1]["content"]):  # type: ignore[arg-type]
        shown = [i for i in range(80) if f"'layers.{i}': " in text]
        assert shown == [0, 1, 2, 79] and "# ... 76 more instances, left out of this prompt" in text
        assert "FORGE_INSTANCE = 'layers.0'" in text and "def get_init_inputs():" in text
    ast.parse(op_shown(source))  # still Python: the cut keeps the table's braces
    small = op_source(choose_classes(_profile(_cls("Layer", 0.8, *layers[:4])), "toy")[0].groups[0], profile)
    assert op_shown(small) == small


def test_inductors_listing_is_the_coders_and_not_repeated_to_the_judge():
    listing = "def call(args):\n    kernel_cpp_0(buf0, arg0_1)  # the listing's own line"
    compiled = CompiledBaseline(
        speedup_vs_eager=1.5, pairs=10, eager_ms=0.3, compiled_ms=0.2, code=listing, code_chars=len(listing)
    )
    brief = OpBrief(device="cpu", compiled=compiled)
    ctx = _ctx()
    ctx.brief = brief
    coder = LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"]  # type: ignore[arg-type]
    assert "kernel_cpp_0(buf0, arg0_1)" in coder and "1.50x eager. Its generated code (kernels and call" in coder
    verdict = Verdict.from_json({"status": "passed", "reason": None, "checks": [], "timings_ms": {"candidate": 1.0}})
    item = HistoryItem(round=1, source="a = 1\n", status=AttemptStatus.PASSED, attempt_id=1)
    judged_ctx = _with_parent(_ctx([item]), item)
    judged_ctx.brief = brief
    client = FakeClient(['{"next_step": "tile it", "continue": false}'])
    LLMJudge(client).review(judged_ctx, verdict)  # type: ignore[arg-type]
    judged = client.seen[0][-1]["content"]
    assert "0.2000 ms a call in the same alternating calls: 1.50x eager." in judged  # the figure stays
    assert "kernel_cpp_0" not in judged and "Its generated code is in the coder's brief, not repeated here" in judged


def _kernel(variant: str) -> str:
    body = "\n".join(f"        acc{i} = x[..., {i}] * {i} + acc{i - 1 if i else 0}" for i in range(60))
    head = "import torch\nfrom forge_reference import Model\n\n\nclass ModelNew(Model):\n    def forward(self, x):\n"
    return f"{head}{body}\n        return x.softmax(-1){variant}\n"


def test_a_refinement_of_the_fastest_attempt_is_shown_as_a_diff_from_it():
    """Round 3 builds on round 2's attempt, a small change of round 1's, the fastest so far: the
    fastest is shown whole once, round 2's as a unified diff from it (two copies of one kernel made
    a 64k-character prompt on an attention op); a rewrite, whose diff is no shorter, stays whole."""
    fastest = HistoryItem(1, _kernel(""), AttemptStatus.PASSED, attempt_id=1, speedup_vs_eager=2.0)
    tweak = HistoryItem(2, _kernel(" * 1.0"), AttemptStatus.PASSED, attempt_id=3, speedup_vs_eager=1.5)
    ctx = replace(_ctx([fastest, tweak]), parent=tweak)
    text = LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"]  # type: ignore[arg-type]
    assert "Its source, as a unified diff from attempt 1's (shown whole below" in text
    assert "-        return x.softmax(-1)\n+        return x.softmax(-1) * 1.0" in text
    assert text.count("acc30 = x[..., 30]") == 1  # the kernel once, not twice
    assert "### The fastest attempt so far: attempt 1" in text

    rewrite = HistoryItem(2, "import torch\n" + _kernel("").replace("acc", "part"), AttemptStatus.PASSED)
    rewrite.attempt_id, rewrite.speedup_vs_eager = 3, 1.5
    text = LLMCoder(FakeClient([])).prompt(replace(_ctx([fastest, rewrite]), parent=rewrite))[-1]["content"]  # type: ignore[arg-type]
    assert "as a unified diff" not in text and text.count("part30 = x[..., 30]") == 1


def test_the_fastest_so_far_is_the_one_its_rounds_match_chose_not_a_loser_with_a_higher_verdict():
    """Round 1's two candidates were timed together and the match chose attempt 1 (its own verdict
    3.5x) over attempt 2 (5.2x in its own noise): round 2's attempt builds on attempt 1, and no
    "fastest so far" names attempt 2 and shows its kernel whole beside it; a match that decided
    nothing leaves the verdicts to rank."""
    from forge.core.round_match import MatchedSide, RoundMatch

    match = RoundMatch(sides=[MatchedSide(name="attempt 1"), MatchedSide(name="attempt 2")], regime="warm")
    chosen = HistoryItem(1, _kernel(""), AttemptStatus.PASSED, attempt_id=1, speedup_vs_eager=3.5, matched=match)
    loser = HistoryItem(1, _kernel(" + 0"), AttemptStatus.PASSED, attempt_id=2, speedup_vs_eager=5.2)
    later = HistoryItem(2, _kernel(" * 1.0"), AttemptStatus.PASSED, attempt_id=4, speedup_vs_eager=3.0)
    text = LLMCoder(FakeClient([])).prompt(replace(_ctx([chosen, loser, later]), parent=later))[-1]["content"]  # type: ignore[arg-type]
    assert "### The fastest attempt so far: attempt 1 (round 1, 3.50x eager)" in text
    assert "attempt 2 (round 1" not in text

    chosen.matched = RoundMatch(sides=[], failed="the match's verification failed")
    text = LLMCoder(FakeClient([])).prompt(replace(_ctx([chosen, loser, later]), parent=later))[-1]["content"]  # type: ignore[arg-type]
    assert "### The fastest attempt so far: attempt 2 (round 1, 5.20x eager)" in text


def test_after_an_edit_that_did_not_apply_the_prompt_shows_the_source_it_was_meant_for():
    """The round after a reply with no candidate (its edit's SEARCH text not found) shows the
    attempt before it whole, and offers it for editing again, with the reason the edit failed."""
    passed = HistoryItem(1, _kernel(""), AttemptStatus.PASSED, attempt_id=1, speedup_vs_eager=2.0)
    failed = HistoryItem(
        2,
        "```edit 1\n...\n```",
        AttemptStatus.INVALID_REPLY,
        reason="the edit of attempt 1: hunk 1 of 1 does not apply",
        attempt_id=3,
    )
    text = LLMCoder(FakeClient([])).prompt(replace(_ctx([passed, failed]), parent=failed))[-1]["content"]  # type: ignore[arg-type]
    assert "hunk 1 of 1 does not apply" in text
    assert text.count("acc30 = x[..., 30]") == 1 and "changes a few lines of attempt 1 above" in text
