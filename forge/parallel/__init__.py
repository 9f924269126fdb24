"""Parallel plans on a real model, checked in a ladder: the static rules a plan must pass before
anything runs, a cost model (memory per device, step time, communication; calibrated from real
runs), and a real run on local processes that applies the plan with torch.distributed's own APIs
and compares the sharded model with the unsharded one (outputs, gradients, a step), and the
built-in plan search (every plan worth trying, screened and ranked)."""

from forge.parallel.cost_model import Calibration, Machine, Prediction, model_facts, over_memory, predict
from forge.parallel.mesh_run import LinkFigures, MeshRun, RankResult, max_local_ranks, measure_link, run_plan
from forge.parallel.plan_search import Screened, candidate_plans, screen
from forge.parallel.static_checks import static_checks

__all__ = [
    "Calibration",
    "LinkFigures",
    "Machine",
    "MeshRun",
    "Prediction",
    "RankResult",
    "Screened",
    "candidate_plans",
    "max_local_ranks",
    "measure_link",
    "model_facts",
    "over_memory",
    "predict",
    "run_plan",
    "screen",
    "static_checks",
]
