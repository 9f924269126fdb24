"""The LLM plan path against the scripted OpenAI-protocol server (the real litellm client): a reply
whose JSON does not validate is a recorded failed attempt with the reason, the next valid plan
goes up the ladder and is banked, and the advisor's reading reaches the next prompt."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from benchmarks.support.llm_server import Script, serve
from forge.harness import PlanOptions, optimize_plan

TRANSFORMER = Path(__file__).parent / "ops" / "tiny_transformer.py"
FSDP_PLAN = {
    "mesh": {"dp": 2, "tp": 1},
    "fsdp": {"units": ["blocks.*"], "reshard_after_forward": True},
    "note": "shard the blocks over both ranks",
}


@pytest.mark.e2e  # a plan session behind the scripted server, ~11 s
def test_an_invalid_plan_then_a_valid_one(tmp_path, fast_settings):
    script = Script(
        coder=[
            '```json\n{"mesh": {"dp": 2, "tp": 1}, "tp": [{"pattern": "blocks.*.mlp.up", "style": "diagonal"}]}\n```',
            f"Shard the blocks.\n```json\n{json.dumps(FSDP_PLAN)}\n```",
        ],
        judge=["FSDP over the blocks matched; try keeping parameters after forward next."],
    )
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        options = PlanOptions(world_size=2, model="openai/test-model", api_base=url, rounds=2, bank=bank)
        result = optimize_plan(TRANSFORMER, options, fast_settings)
    assert result.plan_id is not None and result.mesh == "2x1", result.reason
    assert result.tokens > 0 and result.cost_usd is None  # a local model has no price: unknown, not $0
    with sqlite3.connect(bank) as db:
        rows = db.execute("SELECT status, verdict, response FROM attempts WHERE role = 'plan' ORDER BY id").fetchall()
        (agent,) = db.execute("SELECT agent FROM parallel_plans").fetchone()
    assert [r[0] for r in rows] == ["invalid_reply", "passed"] and agent == "llm"
    reason = json.loads(rows[0][1])["reason"]
    assert "does not validate" in reason and "tp.0.style" in reason and "diagonal" in rows[0][2]
    prompts = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "coder"]
    assert "invalid_reply" in prompts[1] and "tp.0.style" in prompts[1]  # the failure is shown to the planner
    assert "blocks.0.attn.q: Linear" in prompts[0]  # the module tree with shapes
    judged = [r["messages"][-1]["content"] for r in script.requests if r["role"] == "judge"]
    assert len(judged) == 1 and "measured step" in judged[0] and "predicted step" in judged[0]
