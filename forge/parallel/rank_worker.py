"""One rank of a real run of a plan (``python -m forge.parallel.rank_worker JOB.json``, spawned by
``mesh_run``): build the model from its file with the job's seed (identical weights on every
rank), keep an unsharded copy as the reference, shard the model as the plan says, and compare on
the same inputs: the outputs, then (training) every parameter's gradient and every parameter
after one optimizer step. Then time a few steps. The verdict goes to this rank's result file."""

from __future__ import annotations

import copy
import json
import os
import resource
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from pydantic import BaseModel
from torch.distributed.tensor import DTensor

from forge.core.parallel_plan import ParallelPlan
from forge.core.problem import load_problem
from forge.kernelbank.plan_apply import apply_plan, plan_mesh
from forge.parallel.rank_exit import leave_group


class RankJob(BaseModel):
    model_path: str
    plan: dict[str, Any]
    train: bool = True
    steps: int = 5
    seed: int = 0
    timeout_s: float = 120.0
    result_dir: str


def _full(t: Any) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


def _tolerance(dtype: torch.dtype) -> float:
    return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4


def _differs(what: str, got: torch.Tensor, want: torch.Tensor) -> str | None:
    """Why ``got`` is not ``want`` within the dtype's tolerance (None: it is)."""
    if got.shape != want.shape:
        return f"{what}: shape {tuple(got.shape)} where the unsharded model gives {tuple(want.shape)}"
    tol = _tolerance(want.dtype)
    if torch.allclose(got.float(), want.float(), atol=tol, rtol=tol):
        return None
    return f"{what}: max abs error {(got.float() - want.float()).abs().max().item():.3g} (tolerance {tol:g})"


def _split(x: Any, parts: int, index: int) -> Any:
    return x.chunk(parts)[index] if parts > 1 and isinstance(x, torch.Tensor) and x.dim() else x


def _first_tensor(out: Any) -> Any:
    return out[0] if isinstance(out, tuple | list) else out


def _compare_step(
    model: torch.nn.Module, reference: torch.nn.Module, inputs: list[Any], plan: ParallelPlan, dp_rank: int, train: bool
) -> list[str]:
    """Outputs, gradients and parameters after one SGD step, each against the reference."""
    dp = plan.degree("dp")
    local = [_split(x, dp, dp_rank) for x in inputs]
    out, ref_out = _first_tensor(model(*local)), _first_tensor(reference(*inputs))
    problems = [_differs("output", _full(out), _split(ref_out, dp, dp_rank))]
    if train:
        out.float().pow(2).mean().backward()
        ref_out.float().pow(2).mean().backward()
        ref_params = dict(reference.named_parameters())
        for name, p in model.named_parameters():
            want = ref_params[name].grad
            if p.grad is not None and want is not None:
                problems.append(_differs(f"gradient of {name}", _full(p.grad), want))
        for m in (model, reference):
            torch.optim.SGD(m.parameters(), lr=0.1).step()
        for name, p in model.named_parameters():
            problems.append(_differs(f"{name} after an optimizer step", _full(p.detach()), ref_params[name].detach()))
    return [p for p in problems if p]


def _step_times(
    model: torch.nn.Module, inputs: list[Any], plan: ParallelPlan, dp_rank: int, job: RankJob
) -> list[float]:
    local = [_split(x, plan.degree("dp"), dp_rank) for x in inputs]
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    times = []
    for _ in range(job.steps + 1):  # the first is a warm-up
        dist.barrier()
        t0 = time.perf_counter()
        if job.train:
            opt.zero_grad()
            _first_tensor(model(*local)).float().pow(2).mean().backward()
            opt.step()
        else:
            with torch.no_grad():
                model(*local)
        dist.barrier()
        times.append((time.perf_counter() - t0) * 1000)
    return times[1:]


def run(job: RankJob) -> dict[str, Any]:
    rank = int(os.environ["RANK"])
    # longer than the run's own limit: the parent names the rank that hangs, not a collective's timeout
    dist.init_process_group("gloo", timeout=timedelta(seconds=2 * job.timeout_s))
    plan = ParallelPlan.from_json(job.plan)
    problem = load_problem(job.model_path)
    torch.manual_seed(job.seed)
    reference = problem.build_model()
    model = copy.deepcopy(reference)
    torch.manual_seed(job.seed + 1)
    inputs = list(problem.module.get_inputs())
    mesh = plan_mesh(plan, "cpu")
    apply_plan(model, plan, mesh)
    dp_rank = mesh["dp"].get_local_rank()
    try:
        problems = _compare_step(model, reference, inputs, plan, dp_rank, job.train)
    except Exception as exc:  # the sharded model does not run: the plan's failure, named
        problems = [f"the sharded model raised {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"]
    times = _step_times(model, inputs, plan, dp_rank, job) if not problems else [0.0]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "rank": rank,
        "mismatches": problems,
        "step_ms": times,
        "median_ms": statistics.median(times),
        "peak_rss_mb": peak_mb,
    }


def main() -> None:
    job = RankJob.model_validate_json(Path(sys.argv[1]).read_text())
    result = run(job)
    done = Path(job.result_dir, f"rank{result['rank']}.json")
    partial = done.with_suffix(".part")
    partial.write_text(json.dumps(result))
    partial.replace(done)
    leave_group()


if __name__ == "__main__":
    main()
