"""What the LLM coder and judge are told, end to end: a real session against the scripted
OpenAI-protocol server, real verifier workers, the op's brief measured for real, and a real load
on the machine while the first candidate is timed."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys

import pytest

from benchmarks.support.llm_server import Script, serve
from forge.core.figures import AttemptFigures
from forge.core.verdict import Verdict
from forge.harness import OptimizeOptions, optimize
from forge.harness import events as ev
from tests.conftest import OPS
from tests.harness.test_llm_session import judge_json

OP = OPS / "loop_rowsum.py"
MARKER = "# the last line of a long candidate"
# A correct candidate longer than 12k characters: its end must reach both roles whole.
NOTES = "".join(f"# notes on tiling, line {i}: rows split over threads, columns over SIMD lanes\n" for i in range(190))
LONG = (
    "```python\nimport torch\nfrom forge_reference import Model\n\n\nclass ModelNew(Model):\n"
    "    def forward(self, x):\n        return x.sum(dim=1)\n\n" + NOTES + MARKER + "\n```"
)
RIGHT = (
    "```python\nimport torch\nfrom forge_reference import Model\n\n\nclass ModelNew(Model):\n"
    "    def forward(self, x):\n        return torch.sum(x, dim=1)\n```"
)


@pytest.fixture
def burners():
    """Two processes spinning on the cores, started when the test says (the load another job puts
    on a shared machine); what is running of them ends with the test."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        procs.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2))

    yield procs, start
    for p in procs:
        p.kill()
        p.wait()


def _coder_ids(bank) -> list[int]:
    with sqlite3.connect(bank) as db:
        return [i for (i,) in db.execute("SELECT id FROM attempts WHERE role = 'coder' ORDER BY id")]


def _verdict(bank, attempt_id: int) -> Verdict:
    import json

    with sqlite3.connect(bank) as db:
        (text,) = db.execute("SELECT verdict FROM attempts WHERE id = ?", (attempt_id,)).fetchone()
    return Verdict.from_json(json.loads(text))


@pytest.mark.e2e
def test_the_agents_are_told_the_brief_whole_sources_one_set_of_figures_and_no_speedup_under_load(
    tmp_path, fast_settings, burners, monkeypatch
):
    monkeypatch.setattr("forge.verifier.parent.timing.paired._QUIET_WAIT_S", 1.0)  # the verifier's own retries, short
    settings = fast_settings.model_copy(update={"compile_baseline": True, "quiet_wait_s": 60.0, "load_check": True})
    assert len(LONG) > 12_000
    # three rounds: the judge reviews the first two (the last round's review is not asked for)
    script = Script(coder=[LONG, RIGHT, RIGHT], judge=[judge_json("vectorise it"), judge_json("go on")])
    seen: list[ev.Event] = []

    running, start_load = burners

    def emit(e: ev.Event) -> None:
        seen.append(e)
        # the load comes with the first candidate, once the brief was measured (under it the brief's
        # compiling took a minute of the test), and goes once that candidate was timed under it
        if isinstance(e, ev.CandidateProposed) and not any(isinstance(s, ev.CandidateProposed) for s in seen[:-1]):
            start_load()
        if isinstance(e, ev.VerdictReady):
            for p in running:
                p.kill()

    bank = tmp_path / "bank.db"
    with serve(script) as url:
        optimize([OP], OptimizeOptions(model="openai/test-model", api_base=url, rounds=3, bank=bank), settings, emit)
    first, second, _third = _coder_ids(bank)
    coder = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "coder"]
    judge = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "judge"]
    assert len(coder) == 3 and len(judge) == 2

    # the brief, measured for this op on this machine, in both roles' prompts
    for prompt in (coder[0], coder[1], judge[0]):
        assert "|yours - reference| <= atol + rtol * |reference|, elementwise, atol 0.0001, rtol 0.0001" in prompt
        assert "sum in any order" in prompt  # what the slack leaves free
        # the per-case slack is the coder's; the judge reads a passing candidate, which met it
        has_table = "| large (x * 100) |" in prompt and "the reference's own error: largest / rms" in prompt
        assert has_table == (prompt is not judge[0]), prompt
        assert "| op | ms | share | calls | vendor library |" in prompt and "aten::sum" in prompt
        assert "torch.compile (Inductor, default mode):" in prompt
        assert "OpenMP runtime loaded" in prompt
    # Inductor's listing is the coder's; the judge is told where it is
    assert "def call(" in coder[0] and "def call(" in coder[1] and "def call(" not in judge[0]
    assert "Its generated code is in the coder's brief, not repeated here" in judge[0]
    # the whole long candidate, to the judge and back to the coder; the bank's attempt ids
    assert MARKER in judge[0] and MARKER in coder[1]
    assert f"attempt {first}, round 1" in judge[0] and f"Attempt {first} (round 1)" in coder[1]
    assert f"attempt {second}, round 2" in judge[1]
    # the round and the limit, so the last round is known to be the last
    assert "This is round 1 of at most 3." in coder[0] and "This is round 3 of at most 3: the last one" in coder[2]
    assert "the machine while it was timed:" in judge[1] and "the op's own (get_inputs)" in judge[1]
    # a C++ session: no Triton or CUDA launch vocabulary anywhere
    for prompt in coder + judge:
        assert "BLOCK" not in prompt and "num_warps" not in prompt

    # the first candidate was timed under the load: shown as not timed, never as a speedup
    busy = [e for e in seen if isinstance(e, ev.VerdictReady) and e.attempt_id == first]
    assert busy and busy[0].busy is not None and busy[0].speedup_vs_eager is None
    assert "not timed: the machine was busy" in judge[0]
    said = re.search(rf"### Attempt {first} \(round 1\): passed\n(.*?)\n\n", coder[1], re.S)
    assert said is not None and "not timed: the machine was busy" in said.group(1) and "x eager" not in said.group(1)
    waits = [e for e in seen if isinstance(e, ev.MachineBusy)]
    # the load's wait, before round 2's candidate, ended quiet once it went; a 2-core CI machine may
    # make the session wait again later (its own noise), and every such wait ends quiet too
    assert [(w.round, w.waited_s is None) for w in waits[:2]] == [(2, True), (2, False)] and waits[1].quiet
    assert [w.waited_s is None for w in waits] == [True, False] * (len(waits) // 2)
    assert all(w.quiet for w in waits[1::2])

    # the second, timed on a quiet machine: one statistic, as the bank's verdict holds it
    figures = AttemptFigures.of(_verdict(bank, second))
    assert figures.timed and figures.sentence() in judge[1]
    assert "timings (ms)" not in judge[1] and not re.search(r"eager \d+\.\d+ ms", judge[1])
