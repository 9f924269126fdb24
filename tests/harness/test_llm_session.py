"""The LLM path end to end: the real litellm client against a local OpenAI-protocol server that
replays scripted replies, real verifier workers, a real SQLite bank."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.support.llm_server import Script, serve
from forge.core.errors import ProviderError
from forge.harness import OptimizeOptions, optimize
from forge.harness import events as ev
from tests.conftest import OPS

OP = OPS / "loop_rowsum.py"

COMPILE_ERROR = '''Here is a C++ kernel.

```python
import torch
from forge import cpp
from forge_reference import Model

_lib = cpp.load(r"""extern "C" void rowsum(const float* x, float* y, long rows, long cols) { this is not C++ }""")


class ModelNew(Model):
    def forward(self, x):
        y = torch.empty(x.shape[0])
        _lib.rowsum(x.contiguous(), y, x.shape[0], x.shape[1])
        return y
```
'''

WRONG = """The compile error came from a typo; this version avoids C++ entirely:

```python
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        return x.sum(dim=1) * 1.01
```
"""

RIGHT = """I removed the stray scale factor.

```python
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        return x.sum(dim=1)
```
That should be correct and fast."""


def judge_json(step: str, go_on: bool = True) -> str:
    return json.dumps({"diagnosis": "d", "bottleneck": "b", "next_step": step, "continue": go_on})


def _options(url: str, bank: Path, model: str = "openai/test-model", rounds: int = 3) -> OptimizeOptions:
    return OptimizeOptions(model=model, api_base=url, rounds=rounds, bank=bank)


def _attempts(bank: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(bank) as db:
        return db.execute("SELECT role, status FROM attempts ORDER BY id").fetchall()


def test_compile_error_then_wrong_then_right(tmp_path, fast_settings):
    """Four rounds: the judge reviews the third alone. A failed attempt's check and error reach the
    coder's next prompt as they are, with no judge's request; the last round's review, which no
    coder call would read, is not asked for (nor charged)."""
    script = Script(
        coder=[COMPILE_ERROR, WRONG, RIGHT, RIGHT],
        # the first judge answer is prose: it is asked once more and answers JSON
        judge=["Looks like it works.", judge_json("unroll the row loop")],
    )
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        run = optimize([OP], _options(url, bank, rounds=4), fast_settings)
    (result,) = run.results
    assert result.accepted and result.kernel_id is not None, result.reason
    assert [t.status for t in result.trace] == ["compile_error", "failed_correctness", "passed", "passed"]
    assert result.speedup_vs_eager and result.speedup_vs_eager > 1.0
    assert run.exit_code == 0 and run.tokens == 150 * (4 + 2)  # pings are not charged
    assert run.cost_usd is None  # the local model has no price: reported as unknown, not as $0
    (entry,) = run.to_json()["problems"]  # what --json prints for the op: its own tokens and cost
    assert entry["tokens"] == run.tokens and entry["cost_usd"] is None

    coder_prompts = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "coder"]
    assert len(coder_prompts) == 4
    assert "Earlier attempts" not in coder_prompts[0]
    assert "compile_error" in coder_prompts[1] and "this is not C++" in coder_prompts[1]
    assert "compile_error" in coder_prompts[2] and "failed_correctness" in coder_prompts[2]
    assert "max abs error" in coder_prompts[2] and "- the judge's review:" not in coder_prompts[2]
    assert "- the judge's review:" in coder_prompts[3] and "unroll the row loop" in coder_prompts[3]
    roles = [r["role"] for r in script.requests if r["role"] != "ping"]
    # no judge for the failures; one retry after the prose answer; nothing after the last coder call
    assert roles == ["coder", "coder", "coder", "judge", "judge", "coder"], roles
    judged = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "judge"]
    assert "Verdict: passed" in judged[0]
    # an LLM session profiles each passing candidate: its judge reads where the time goes
    assert "where its time goes" in judged[0]

    rows = _attempts(bank)
    assert [s for r, s in rows if r == "coder"] == ["compile_error", "failed_correctness", "passed", "passed"]
    assert [s for r, s in rows if r == "judge"] == ["reviewed"]
    with sqlite3.connect(bank) as db:
        (src,) = db.execute("SELECT source FROM kernels WHERE id = ?", (result.kernel_id,)).fetchone()
        (status, tokens) = db.execute("SELECT status, tokens FROM sessions").fetchone()
    assert "x.sum(dim=1)" in src and "1.01" not in src
    assert status == "finished" and tokens == run.tokens


TWO_IN_ONE = """Two ways; the plain one first:

```python
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        return x.sum(dim=1)
```

and one that keeps a scale I am not sure of:

```python
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        # scaled: the row sums, times a factor I am not sure of
        return x.sum(dim=1) * 1.01
```
"""


TWO_THAT_PASS = """Two ways, both right; the chunked one first:
```python
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        # chunks of two rows: 32 small sums where one would do
        return torch.cat([c.sum(dim=1) for c in x.split(2)])
```
and the one-call form:
```python
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        return x.sum(dim=1)
```
"""


@pytest.mark.e2e
def test_one_reply_with_three_candidates_verifies_each_times_the_passing_ones_together_and_goes_on_from_the_faster(
    tmp_path, fast_settings
):
    """Best of k (k = 3): a reply holding two right candidates and a wrong one verifies all three in
    round 1 and charges the request once. The two that passed are timed again together, call by
    call in the same batches: the one-call row sum (faster by construction than 32 chunked sums)
    is chosen beyond the noise, the judge reviews it alone, and the next prompt builds on it and
    shows the match. The last round's two, with no next round to go on, are not matched."""
    wrong = WRONG.split("```python", 1)[1].split("```", 1)[0]
    reply = TWO_THAT_PASS + f"and a scaled one I am not sure of:\n```python{wrong}```\n"
    script = Script(coder=[reply, TWO_THAT_PASS], judge=[judge_json("keep it"), judge_json("done", go_on=False)])
    bank, seen = tmp_path / "bank.db", list[ev.Event]()
    with serve(script) as url:
        options = replace(_options(url, bank, rounds=2), best_of=3)
        run = optimize([OP], options, fast_settings, seen.append)
    with sqlite3.connect(bank) as db:
        rows = db.execute("SELECT id, round, status FROM attempts WHERE role = 'coder' ORDER BY id").fetchall()
    (chunked, _, s1), (one_call, _, s2), (_, _, s3) = [r for r in rows if r[1] == 1]
    assert (s1, s2, s3) == ("passed", "passed", "failed_correctness"), rows
    (matched,) = [e for e in seen if isinstance(e, ev.RoundMatched)]
    assert sorted(matched.attempts) == [chunked, one_call] and matched.round == 1
    assert matched.chosen == one_call and matched.decisive, matched.summary
    judged = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "judge"]
    # round 1: the chosen one alone; round 2, the last, is not reviewed
    assert len(judged) == 1 and f"## Candidate (attempt {one_call}," in judged[0]
    said = judged[0].split("its round's candidates, timed together", 1)[1].split("\n", 1)[0]
    assert f"attempt {chunked} " in said and f"attempt {one_call} chosen beyond the noise" in said, said
    coder_prompts = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "coder"]
    assert "Reply with up to 3 complete files" in coder_prompts[0]
    assert f"attempt {one_call} chosen beyond the noise" in coder_prompts[1]
    shown = coder_prompts[1].split("Its source", 1)[1].split("```", 2)[1]
    assert "x.sum(dim=1)" in shown and "split(2)" not in shown, shown
    assert run.tokens == 150 * (len(coder_prompts) + len(judged))  # one charge per request, not per candidate
    assert sum(isinstance(e, ev.CostUpdated) for e in seen) == len(coder_prompts) + len(judged)


def test_a_later_prompt_shows_the_fastest_attempt_whole_when_the_last_round_went_elsewhere(tmp_path, fast_settings):
    """Round 1 passes, round 2's only candidate fails: round 3's prompt shows round 2's source (the
    attempt the round went on from) and, under its own heading, round 1's, the fastest so far (a
    judge's "go back to attempt N" needs it); round 2's prompt, built on the fastest, has no such heading."""
    script = Script(coder=[RIGHT, WRONG, RIGHT], judge=[judge_json("go on")] * 3)
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        optimize([OP], _options(url, bank, rounds=3), fast_settings)
    prompts = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "coder"]
    assert len(prompts) == 3 and "The fastest attempt so far" not in prompts[1]
    assert "the last one" in prompts[2] and "is banked if it beats the best so far" in prompts[2]
    fastest = prompts[2].split("The fastest attempt so far", 1)[1].split("```", 2)[1]
    assert "x.sum(dim=1)" in fastest and "1.01" not in fastest, fastest


class EditingScript(Script):
    """A model that answers round 2 with an edit of the attempt its prompt offers to have edited
    (its number read from the prompt, as a model reads it)."""

    def reply(self, body: dict[str, Any]) -> str:
        text = super().reply(body)
        offered = re.search(r"changes a few lines of attempt (\d+)", body["messages"][-1]["content"])
        return text.replace("EDITED", offered.group(1)) if offered else text


def test_a_reply_of_edits_is_verified_and_banked_as_the_whole_file_they_give(tmp_path, fast_settings):
    """Round 1's file is off by a scale; round 2 answers with an edit of it that drops the scale:
    the whole file the edit gives is verified, passes and is banked, and its attempt's row holds
    that file, not the edit."""
    edit = (
        "```edit EDITED\n<<<<<<< SEARCH\n        return x.sum(dim=1) * 1.01\n"
        "=======\n        return x.sum(dim=1)\n>>>>>>> REPLACE\n```"
    )
    script = EditingScript(coder=[WRONG, f"Dropping the scale:\n{edit}"])  # round 1 failed: no judge
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        run = optimize([OP], _options(url, bank, rounds=2), fast_settings)
    (result,) = run.results
    prompts = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "coder"]
    assert "```edit" not in prompts[0] and "changes a few lines of attempt" in prompts[1]
    assert [t.status for t in result.trace] == ["failed_correctness", "passed"], result.trace
    assert result.accepted, result.reason
    with sqlite3.connect(bank) as db:
        (src,) = db.execute("SELECT source FROM kernels WHERE id = ?", (result.kernel_id,)).fetchone()
        rows = db.execute("SELECT candidate_source, response FROM attempts WHERE role = 'coder' ORDER BY id")
        edited = rows.fetchall()[-1]
    assert src == edited[0] == WRONG.split("```python\n")[1].split("```")[0].replace(" * 1.01", "")
    assert "<<<<<<< SEARCH" in edited[1]  # the reply is kept as it was written


def test_best_of_one_asks_for_one_file_and_takes_the_longest_block(tmp_path, fast_settings):
    script = Script(coder=[TWO_IN_ONE])
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        run = optimize([OP], replace(_options(url, bank, rounds=1), best_of=1), fast_settings)
    (prompt,) = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "coder"]
    assert "Reply with the complete file in one ```python block." in prompt
    assert [t.status for t in run.results[0].trace] == ["failed_correctness"]  # WRONG's block is the longer


def test_garbage_replies_are_failed_attempts_not_crashes(tmp_path, fast_settings):
    garbage = [
        "",
        "Sorry, I cannot help with kernels.",
        "```python\nprint('no model here')\n```",
        "```python\nclass ModelNew(\n",
    ]
    script = Script(coder=list(garbage))
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        run = optimize([OP], _options(url, bank, rounds=4), fast_settings)
    (result,) = run.results
    assert not result.accepted and run.exit_code == 1
    statuses = [t.status for t in result.trace]
    assert statuses[:3] == ["invalid_reply"] * 3
    # an unparseable block defining ModelNew is still tried: the verifier reports the syntax error
    assert statuses[3] == "compile_error", result.trace[3]
    assert not any(r["role"] == "judge" for r in script.requests[:4])
    second_prompt = [r for r in script.requests if r["role"] == "coder"][1]["messages"][-1]["content"]
    assert "the reply was empty" in second_prompt


def test_budget_stops_the_session(tmp_path, fast_settings):
    # a priced model (litellm's bundled price map) served locally: the first call spends the budget
    script = Script(coder=[WRONG, RIGHT], judge=[judge_json("drop the 1.01")])
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        options = replace(_options(url, bank, model="openai/gpt-4o", rounds=5), budget_usd=1e-6)
        run = optimize([OP], options, fast_settings)
    (result,) = run.results
    assert result.status == "budget" and not result.accepted
    assert run.exit_code == 4
    assert run.cost_usd is not None and run.cost_usd > 1e-6
    assert sum(r["role"] == "coder" for r in script.requests) == 1


def test_provider_down_is_found_before_the_session(tmp_path, fast_settings):
    script = Script(fail_with=503)
    with serve(script) as url, pytest.raises(ProviderError) as err:
        optimize([OP], _options(url, tmp_path / "bank.db"), fast_settings)
    assert err.value.exit_code == 3 and "no answer" in err.value.message
    assert not (tmp_path / "bank.db").exists() or not _attempts(tmp_path / "bank.db")


def test_missing_key_names_the_variable(tmp_path, fast_settings, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ProviderError) as err:
        optimize(
            [OP], OptimizeOptions(model="anthropic/claude-3-5-sonnet-20240620", bank=tmp_path / "b.db"), fast_settings
        )
    assert "ANTHROPIC_API_KEY" in err.value.message


def test_streamed_replies_arrive_as_they_grow_and_are_stored_whole(tmp_path, fast_settings):
    """With ``stream_replies`` (the TUI asks for it) the coder's and the judge's replies stream
    from the provider: ReplyProgress events carry the text so far, growing, and the attempt
    stores the whole reply with its tokens counted as usual."""
    script = Script(coder=[RIGHT], judge=[judge_json("done", go_on=False)], chunk_chars=8, chunk_delay_s=0.03)
    seen: list[ev.Event] = []
    bank = tmp_path / "bank.db"
    with serve(script) as url:  # two rounds: the judge is asked after the first (and says stop)
        options = OptimizeOptions(model="openai/test-model", api_base=url, rounds=2, bank=bank, stream_replies=True)
        run = optimize([OP], options, fast_settings, seen.append)
    progress = [e for e in seen if isinstance(e, ev.ReplyProgress)]
    coder = [e.text for e in progress if e.role == "coder"]
    assert len(coder) >= 2 and coder[-1] == RIGHT and all(RIGHT.startswith(t) for t in coder)
    assert any(e.role == "judge" for e in progress)
    assert all(r.get("stream") for r in script.requests if r["role"] != "ping")
    with sqlite3.connect(bank) as db:
        (response, tokens) = db.execute("SELECT response, tokens FROM attempts WHERE role = 'coder'").fetchone()
    assert response == RIGHT and tokens == 150 and run.tokens == 300


def test_replies_are_not_streamed_unless_asked(tmp_path, fast_settings):
    script = Script(coder=[RIGHT], judge=[judge_json("done", go_on=False)])
    seen: list[ev.Event] = []
    with serve(script) as url:
        optimize([OP], _options(url, tmp_path / "bank.db", rounds=1), fast_settings, seen.append)
    assert not any(isinstance(e, ev.ReplyProgress) for e in seen)
    assert not any(r.get("stream") for r in script.requests)


@pytest.mark.e2e
def test_a_training_session_tells_the_coder_to_write_the_backward_and_feeds_back_the_gradient_check(
    tmp_path, fast_settings
):
    """``train``: the coder's prompt asks for the backward; a kernel without one fails the gradient
    check and the next prompt says so; a right backward passes it, and the prompt after that says
    whether its kernel would be used under autograd (its training step against eager's)."""
    from tests.verifier.test_gradients import FUNCTION, NO_BACKWARD, RIGHT

    right = (
        "```python\n"
        + FUNCTION.format(**RIGHT).replace("import torch\n", "import torch\nfrom forge_reference import Model\n", 1)
        + "```"
    )
    none = "```python\n" + NO_BACKWARD + "```"
    # the judge reviews the passing attempts (rounds 2 and 3 have no failure to review)
    script = Script(coder=[none, right, right], judge=[judge_json("go on")] * 2)
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        options = replace(_options(url, bank, rounds=3), train=True)
        run = optimize([OPS / "gated_scale.py"], options, fast_settings)
    (result,) = run.results
    assert [t.status for t in result.trace][:2] == ["failed_correctness", "passed"], result.trace
    prompts = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "coder"]
    assert all("write the backward too" in p for p in prompts)
    assert "provides no backward" in prompts[1]
    assert "- training: " in prompts[2] and "training step" in prompts[2], prompts[2]
    with sqlite3.connect(bank) as db:
        (stored,) = [json.loads(s) for (s,) in db.execute("SELECT settings FROM sessions")]
    assert stored["train"] is True
