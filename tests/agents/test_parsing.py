"""Reply parsing: every shape of reply gives a source or a reason, never an exception."""

from __future__ import annotations

import pytest

from forge.agents import JudgeFeedback, extract_candidate, parse_feedback

GOOD = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_single_fenced_block():
    got = extract_candidate(f"Here you go:\n```python\n{GOOD}```\nThis is fast.")
    assert got.source == GOOD and got.reason is None


def test_several_blocks_pick_the_python_one_defining_modelnew():
    reply = (
        'First the kernel:\n```cpp\nextern "C" void k() {}\n```\n'
        "A helper:\n```python\ndef helper():\n    return 1\n```\n"
        f"And the module:\n```python\n{GOOD}```\n"
    )
    assert extract_candidate(reply).source == GOOD


def test_unfenced_code_is_accepted_when_it_parses():
    assert extract_candidate(GOOD).source == GOOD


def test_unterminated_fence():
    assert extract_candidate(f"```python\n{GOOD}").source == GOOD


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty"),
        ("I cannot help with that.", "no code block"),
        ("```python\ndef f():\n    pass\n```", "none defines class ModelNew"),
        ("```cpp\nint main() {}\n```", "none defines class ModelNew"),
    ],
)
def test_replies_without_a_candidate_give_a_reason(reply, reason):
    got = extract_candidate(reply)
    assert got.source is None and reason in (got.reason or "")


def test_judge_json_in_prose_or_fence():
    fb, why = parse_feedback('Sure! {"diagnosis": "", "bottleneck": "memory", "next_step": "fuse", "continue": false}')
    assert why is None and isinstance(fb, JudgeFeedback)
    assert fb.bottleneck == "memory" and fb.continue_search is False
    fb, _ = parse_feedback('```json\n{"next_step": "tile by 64", "config": {"BLOCK": 64}}\n```')
    assert fb is not None and fb.config == {"BLOCK": 64} and fb.continue_search is True


@pytest.mark.parametrize(
    ("reply", "reason"),
    [("no json here", "no JSON object"), ('{"continue": "maybe"}', "schema"), ("{broken", "no JSON object")],
)
def test_bad_judge_replies(reply, reason):
    fb, why = parse_feedback(reply)
    assert fb is None and reason in (why or "")


def _block(body: str) -> str:
    return f"```python\nfrom forge_reference import Model\n\n\nclass ModelNew(Model):\n    {body}\n```\n"


def test_several_candidates_in_one_reply_come_in_order_up_to_the_limit_without_repeats():
    from forge.agents.parsing import extract_candidates

    a, b, c = (_block(f"scale = {k}") for k in (1, 2, 3))
    reply = f"First:\n{a}\nthe same again:\n{a}\nthen:\n{b}\n```cpp\nint x;\n```\nand {c}"
    got = extract_candidates(reply, 2)
    assert [e.source and e.source.split("scale = ")[1].strip() for e in got] == ["1", "2"]
    assert len(extract_candidates(reply, 5)) == 3  # the repeat dropped, the C++ block not a candidate
    (only,) = extract_candidates(reply, 1)  # one asked for: the single-candidate rule (the longest)
    assert only.source is not None and only.reason is None
    (none,) = extract_candidates("no code here", 3)
    assert none.source is None and none.reason == "the reply contains no code block and no class ModelNew"
