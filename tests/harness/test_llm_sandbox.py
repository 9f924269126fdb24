"""The LLM path under the sandbox: the provider's key reaches forge's client, never the process
that runs the model's candidate."""

from __future__ import annotations

import json
import sqlite3

import pytest

from benchmarks.support.llm_server import Script, serve
from forge.harness import OptimizeOptions, optimize
from tests.conftest import OPS

OP = OPS / "loop_rowsum.py"
SECRET = "sk-forge-test-secret"
LEAKY = """A row sum, and a look around:

```python
import os
import torch
from forge_reference import Model

print("ENV:", sorted(k for k, v in os.environ.items() if "sk-forge-test-secret" in v))


class ModelNew(Model):
    def forward(self, x):
        return x.sum(dim=1)
```
"""


def test_no_key_reaches_the_candidates_process(tmp_path, fast_settings, monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FORGE_LLM_API_KEY"):
        monkeypatch.setenv(name, SECRET)
    judge = json.dumps({"diagnosis": "d", "bottleneck": "b", "next_step": "stop", "continue": False})
    script = Script(coder=[LEAKY], judge=[judge])
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        optimize([OP], OptimizeOptions(model="openai/test-model", api_base=url, rounds=1, bank=bank), fast_settings)
    assert [r for r in script.requests if r["role"] == "coder"], "the coder was never asked"
    with sqlite3.connect(bank) as db:
        rows = db.execute("SELECT verdict FROM attempts WHERE role = 'coder'").fetchall()
    verdicts = [json.loads(v) for (v,) in rows if v]
    assert verdicts and verdicts[0]["status"] == "passed", verdicts
    assert all("ENV: []" in v["candidate_output"] for v in verdicts), [v["candidate_output"] for v in verdicts]


CANARY = "zq9" + "0123456789abcdef" + "canary"  # in the project's .env, shaped like a token
READS_DOTENV = """Reads the project's .env:

```python
import torch
from forge_reference import Model

print(open(".env").read())


class ModelNew(Model):
    def forward(self, x):
        return x.sum(dim=1)
```
"""
PRINTS_KEY = """Prints a key it was given:

```python
import torch
from forge_reference import Model

print("key", "zq9" + "0123456789abcdef" + "canary")


class ModelNew(Model):
    def forward(self, x):
        return x.sum(dim=1)
```
"""


@pytest.mark.e2e  # a whole two-round session: .ci/run's heavy run
def test_from_a_project_folder_the_dotenv_is_refused_and_a_printed_key_reaches_no_prompt_or_bank(
    tmp_path, fast_settings, monkeypatch
):
    project = tmp_path / "project"
    project.mkdir()
    (project / "rowsum.py").write_text(OP.read_text())
    (project / ".env").write_text(f"OPENAI_API_KEY={CANARY}\n")
    monkeypatch.chdir(project)
    go_on = json.dumps({"diagnosis": "d", "bottleneck": "b", "next_step": "go on", "continue": True})
    script = Script(coder=[READS_DOTENV, PRINTS_KEY], judge=[go_on, go_on])
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        options = OptimizeOptions(model="openai/test-model", api_base=url, rounds=2, best_of=1, bank=bank)
        optimize([project / "rowsum.py"], options, fast_settings)
    with sqlite3.connect(bank) as db:
        rows = db.execute("SELECT verdict FROM attempts WHERE role = 'coder' ORDER BY id").fetchall()
    verdicts = [json.loads(v) for (v,) in rows if v]
    assert len(verdicts) == 2, verdicts
    assert "Permission denied" in verdicts[0]["reason"] and ".env" in verdicts[0]["reason"], verdicts[0]["reason"]
    assert "[redacted:" in verdicts[1]["candidate_output"], verdicts[1]["candidate_output"]
    coder_asks = [r for r in script.requests if r["role"] == "coder"]
    assert len(coder_asks) == 2  # the second prompt carries the first attempt's verdict
    assert CANARY not in json.dumps(script.requests) and CANARY not in json.dumps(verdicts)
