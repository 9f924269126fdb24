"""Parallel plans on a real model: the static rules a plan must pass before anything runs, how a
plan is applied with torch.distributed's own APIs, and a real run on local processes that
compares the sharded model with the unsharded one (outputs, gradients, a step)."""

from forge.parallel.apply_plan import apply_plan, plan_mesh
from forge.parallel.mesh_run import MeshRun, RankResult, run_plan
from forge.parallel.static_checks import matched_modules, static_checks

__all__ = ["MeshRun", "RankResult", "apply_plan", "matched_modules", "plan_mesh", "run_plan", "static_checks"]
