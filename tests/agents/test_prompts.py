"""Prompt templates render with everything the issue asks of them, and history carries verdicts."""

from __future__ import annotations

from forge.agents.llm.agents import LLMCoder, LLMJudge
from forge.agents.llm.client import Completion
from forge.agents.llm.prompts import category
from forge.agents.roles import CoderContext, HistoryItem, JudgeFeedback, MachineFacts
from forge.core.statuses import AttemptStatus
from forge.core.timing_records import Timings
from forge.core.verdict import Verdict
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
        round=1, source="class ModelNew: pass", status=AttemptStatus.FAILED_CORRECTNESS, reason="stress: case base/1",
        failing_check="stress", error_text="output 0: 12 of 100 elements outside atol", max_abs_error=0.5,
        timings_ms=Timings(candidate=None),
        feedback=JudgeFeedback(diagnosis="NaN handling", next_step="use a NaN-aware max"),
    )  # fmt: skip
    coder = LLMCoder(FakeClient(["```python\nclass ModelNew(Model):\n    pass\n```"]))  # type: ignore[arg-type]
    text = coder.prompt(_ctx([item]))[-1]["content"]
    for needed in ("torch.softmax(x, dim=1)", "class ModelNew(Model)", "state_dict", "OpenMP", "avx2",
                   "bandwidth_gbs", "cpp.load", "failed_correctness", "stress", "0.5", "use a NaN-aware max",
                   "class ModelNew: pass"):  # fmt: skip
        assert needed in text, needed
    (proposal,) = coder.propose(_ctx())
    assert proposal.source and proposal.tokens == 10 and proposal.cost_usd == 0.001


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
    newer = HistoryItem(round=2, source="b", status=AttemptStatus.PASSED, timings_ms=Timings(candidate=1.0),
                        attempt_id=9)  # fmt: skip
    coder = LLMCoder(FakeClient([]))  # type: ignore[arg-type]
    text = coder.prompt(_ctx([older, newer]))[-1]["content"]
    assert "Attempt 7 (round 1)" in text and "Attempt 9 (round 2)" in text and "Attempt 1 " not in text
    verdict = Verdict.from_json({"status": "passed", "reason": None, "checks": [], "timings_ms": {"candidate": 1.0}})
    client = FakeClient(['{"next_step": "tile it", "continue": false}'])
    LLMJudge(client).review(_with_parent(_ctx([older, newer]), newer), verdict)  # type: ignore[arg-type]
    judged = client.seen[0][-1]["content"]
    assert "## Candidate (attempt 9, round 2)" in judged and "- attempt 7, round 1: failed_correctness" in judged
