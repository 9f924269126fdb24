"""A parallel plan's record (JSON round trip) and its static rules, each able to fail with the
module and the number it is about."""

from __future__ import annotations

import json

import pytest
import torch
from pydantic import ValidationError

from forge.core.parallel_plan import FsdpSettings, Layout, ParallelPlan, TpRule, matched_modules
from forge.parallel import static_checks
from tests.parallel.models import TinyTransformer

TOKENS = torch.randint(0, 128, (4, 16))
MEGATRON = [  # the usual tensor-parallel recipe for a transformer block
    TpRule(pattern="blocks.*.attn.[qkv]", style="colwise"),
    TpRule(pattern="blocks.*.attn.proj", style="rowwise"),
    TpRule(pattern="blocks.*.mlp.up", style="colwise"),
    TpRule(pattern="blocks.*.mlp.down", style="rowwise"),
]


def _failed(plan: ParallelPlan, model: torch.nn.Module | None = None, world: int = 4) -> dict[str, str]:
    return {c.name: c.detail for c in static_checks(model or TinyTransformer(), plan, world, [TOKENS]) if not c.passed}


def test_a_plan_round_trips_through_json_unchanged():
    plan = ParallelPlan(
        mesh={"dp": 2, "tp": 2},
        tp=MEGATRON,
        fsdp=FsdpSettings(units=["blocks.*"]),
        checkpoint=["blocks.*.mlp"],
        microbatches=2,
        note="2x2",
    )
    again = ParallelPlan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again == plan and again.world_size == 4
    with pytest.raises(ValidationError):
        ParallelPlan.from_json({"mesh": {"dp": 0}})
    with pytest.raises(ValidationError):
        ParallelPlan.from_json({"tp": [{"pattern": "x", "style": "diagonal"}]})


def test_the_usual_transformer_recipes_pass():
    assert _failed(ParallelPlan(mesh={"dp": 1, "tp": 4}, tp=MEGATRON)) == {}
    assert _failed(ParallelPlan(mesh={"dp": 2, "tp": 2}, tp=MEGATRON, fsdp=FsdpSettings(units=["blocks.*"]))) == {}
    assert _failed(ParallelPlan(mesh={"dp": 4}, fsdp=FsdpSettings(units=["blocks.*", "embed"]))) == {}
    assert matched_modules(TinyTransformer(), "blocks.*.attn.[qkv]") == [
        f"blocks.{i}.attn.{t}" for i in range(2) for t in "qkv"
    ]


def test_each_rule_fails_with_what_it_is_about():
    assert "has 2 ranks, the world size is 4" in _failed(ParallelPlan(mesh={"dp": 1, "tp": 2}, tp=MEGATRON))["mesh"]
    assert "dp=4 without fsdp" in _failed(ParallelPlan(mesh={"dp": 4}))["mesh"]
    eight = ParallelPlan(mesh={"dp": 8}, fsdp=FsdpSettings(units=["blocks.*"]))
    assert "the batch (4) does not split over dp=8" in _failed(eight, world=8)["mesh"]
    missing = ParallelPlan(mesh={"tp": 4}, tp=[*MEGATRON, TpRule(pattern="blocks.*.ffn", style="colwise")])
    assert "'blocks.*.ffn' matches no module" in _failed(missing)["patterns"]
    twice = ParallelPlan(
        mesh={"tp": 4}, tp=[TpRule(pattern="head", style="colwise"), TpRule(pattern="h*", style="rowwise")]
    )
    assert "'head' is matched by both" in _failed(twice)["patterns"]
    norm = ParallelPlan(mesh={"tp": 4}, tp=[TpRule(pattern="blocks.*.norm1", style="colwise")])
    assert "LayerNorm): colwise splits a Linear or an Embedding" in _failed(norm)["styles"]
    odd = TinyTransformer(num_heads=2)  # 4 ranks cannot share 2 heads
    assert (
        "its 2 attention heads do not split over tp=4"
        in _failed(ParallelPlan(mesh={"tp": 4}, tp=MEGATRON), odd)["divisible"]
    )
    ffn = TinyTransformer(ffn=130)
    assert (
        "out_features 130 does not split over tp=4"
        in _failed(ParallelPlan(mesh={"tp": 4}, tp=MEGATRON), ffn)["divisible"]
    )
    colwise_twice = ParallelPlan(mesh={"tp": 4}, tp=[TpRule(pattern="blocks.*.mlp.*", style="colwise")])
    assert (
        "blocks.0.mlp.up leaves its output shard_last, blocks.0.mlp.down takes its input replicate"
        in (_failed(colwise_twice)["layouts"])
    )
    gathered = [
        TpRule(pattern="blocks.*.mlp.up", style="colwise", output_layout=Layout.REPLICATE),
        TpRule(pattern="blocks.*.mlp.down", style="colwise", output_layout=Layout.REPLICATE),
    ]
    assert "layouts" not in _failed(ParallelPlan(mesh={"tp": 4}, tp=gathered))


def test_a_numerically_wrong_plan_can_pass_the_static_rules():
    """A colwise output normalised over its sharded hidden size: the static rules cannot see the
    norm between two planned modules; the real run is what catches it."""
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 64))
    plan = ParallelPlan(mesh={"tp": 2}, tp=[TpRule(pattern="0", style="colwise"), TpRule(pattern="2", style="rowwise")])
    assert all(c.passed for c in static_checks(model, plan, 2, [torch.randn(2, 8, 64)]))
