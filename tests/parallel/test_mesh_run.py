"""Real runs of plans on local processes (gloo, world size 2 and 4): valid plans match the
unsharded model (outputs, every gradient, the parameters after a step); a plan that passes the
static rules but is numerically wrong is refused with the mismatch named; a hung rank is killed
within the time limit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from forge.core.importing import import_file
from forge.core.parallel_plan import FsdpSettings, ParallelPlan, TpRule
from forge.parallel import candidate_plans, run_plan, static_checks
from tests.parallel.test_plan_static import MEGATRON

pytestmark = pytest.mark.mesh  # multi-process meshes (minutes): in .ci/run's heavy run

OPS = Path(__file__).parent / "ops"


def test_tp_fsdp_and_2x2_plans_match_the_unsharded_model():
    for plan, world in (
        (ParallelPlan(mesh={"dp": 1, "tp": 2}, tp=MEGATRON), 2),
        (ParallelPlan(mesh={"dp": 2, "tp": 1}, fsdp=FsdpSettings(units=["blocks.*"])), 2),
        (ParallelPlan(mesh={"dp": 2, "tp": 2}, tp=MEGATRON, fsdp=FsdpSettings(units=["blocks.*"])), 4),
    ):
        run = run_plan(OPS / "tiny_transformer.py", plan, world, steps=3, timeout_s=180)
        assert run.ok, (plan.mesh, run.reason)
        assert len(run.ranks) == world and run.step_ms and run.step_ms > 0 and run.peak_rss_mb


def test_a_statically_valid_but_wrong_plan_is_refused_with_the_mismatch_named():
    plan = ParallelPlan(
        mesh={"tp": 2}, tp=[TpRule(pattern="up", style="colwise"), TpRule(pattern="down", style="rowwise")]
    )
    op = import_file("norm_after_colwise_op", OPS / "norm_after_colwise.py")
    assert all(c.passed for c in static_checks(op.Model(), plan, 2, op.get_inputs()))
    run = run_plan(OPS / "norm_after_colwise.py", plan, 2, steps=1, timeout_s=120)
    assert not run.ok and "differs from the unsharded model" in run.reason
    # the norm is handed half of the hidden dimension: named as the sharded model's own error
    assert "raised RuntimeError" in run.reason and "normalized_shape=[64]" in run.reason


def test_a_hung_rank_is_killed_within_the_time_limit():
    t0 = time.monotonic()
    run = run_plan(OPS / "hangs.py", ParallelPlan(mesh={"dp": 2}), 2, timeout_s=20)
    assert not run.ok and "did not finish within 20 s" in run.reason and "1" in run.reason
    assert time.monotonic() - t0 < 40
    assert torch.get_num_threads() >= 1  # the test process itself is untouched


def test_the_built_in_search_plans_an_mlp_stack_and_its_plans_match():
    op = import_file("mlp_stack_op", OPS / "mlp_stack.py")
    model, inputs = op.Model(), op.get_inputs()
    plans = {p.mesh_text(): p for p in candidate_plans(model, inputs, 4, (2, 2))}
    plan = plans["2x2"]
    assert [(r.pattern, str(r.style)) for r in plan.tp] == [("blocks.*.fc1", "colwise"), ("blocks.*.fc2", "rowwise")]
    assert plan.fsdp is not None and plan.fsdp.units == ["blocks.*"]
    assert all(c.passed for c in static_checks(model, plan, 4, inputs))
    run = run_plan(OPS / "mlp_stack.py", plan, 4, steps=2, timeout_s=180)
    assert run.ok, run.reason
