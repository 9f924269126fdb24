"""A user's two-process program (spawned once per rank by the tests): build the model, keep an
unsharded copy, shard the model with ``bank.parallelize`` (or an exported plan file's
``parallelize``), then check that the outputs equal the unsharded model's and that a training
step leaves the same parameters. Rank 0 writes what it found as JSON.

    python user_program.py MODEL.py (bank BANK | export PLAN.py) RESULT.json DP
"""

import copy
import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

import forge.kernelbank as kb
from forge.core.importing import import_file


def full(t):
    return t.full_tensor() if isinstance(t, DTensor) else t


def main() -> None:
    model_file, how, source, result = sys.argv[1:5]
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    op = import_file("user_model", Path(model_file))
    torch.manual_seed(0)
    model = op.Model(*op.get_init_inputs())
    reference = copy.deepcopy(model)
    torch.manual_seed(1)
    inputs = op.get_inputs()
    if how == "bank":
        plan_id = kb.open(source, strict=True).parallelize(model)
    else:
        plan_id = None
        import_file("exported_plan", Path(source)).parallelize(model)
    dp = int(sys.argv[5])
    tp = world // dp
    local = [x.chunk(dp)[rank // tp] for x in inputs]
    out = model(*local)
    full_out = reference(*inputs)
    plain = type(out) is torch.Tensor
    same_out = torch.allclose(out, full_out.chunk(dp)[rank // tp], atol=1e-4, rtol=1e-4)
    # FSDP averages gradients over the dp ranks: the mean of equal shards' means is the batch's mean
    out.float().pow(2).mean().backward()
    full_out.float().pow(2).mean().backward()
    for m in (model, reference):
        torch.optim.SGD(m.parameters(), lr=0.1).step()
    ref_params = dict(reference.named_parameters())
    worst = max((full(p.detach()) - ref_params[n].detach()).abs().max().item() for n, p in model.named_parameters())
    if rank == 0:
        Path(result).write_text(
            json.dumps(
                {"plan_id": plan_id, "plain_tensor": plain, "same_output": same_out, "param_error_after_step": worst}
            )
        )
    # Both ranks reach the end, then leave without gloo's teardown at exit, which races the other
    # rank's and now and then aborts ("terminate called without an active exception"): a torch
    # teardown flake, not what this program checks. Nothing is in flight after the barrier.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
