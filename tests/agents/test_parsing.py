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
