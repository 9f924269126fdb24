"""Parallel plans on a real model, checked in a ladder: the static rules a plan must pass before
anything runs, a cost model (memory per device, step time, communication; calibrated from real
runs), and a real run on local processes that applies the plan with torch.distributed's own APIs
and compares the sharded model with the unsharded one (outputs, gradients, a step)."""

from forge.parallel.apply_plan import apply_plan, plan_mesh
from forge.parallel.cost_model import Calibration, Machine, Prediction, model_facts, over_memory, predict
from forge.parallel.mesh_run import LinkFigures, MeshRun, RankResult, measure_link, run_plan
from forge.parallel.static_checks import matched_modules, static_checks

__all__ = [
    "Calibration",
    "LinkFigures",
    "Machine",
    "MeshRun",
    "Prediction",
    "RankResult",
    "apply_plan",
    "matched_modules",
    "measure_link",
    "model_facts",
    "over_memory",
    "plan_mesh",
    "predict",
    "run_plan",
    "static_checks",
]
