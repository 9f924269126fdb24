"""The cost model's terms move the way its formulas say, a plan over the memory limit is named,
and calibration from measured steps brings the error down."""

from __future__ import annotations

import torch

from forge.core.parallel_plan import FsdpSettings, ParallelPlan
from forge.parallel import Calibration, Machine, Prediction, model_facts, over_memory, predict
from tests.parallel.models import TinyTransformer
from tests.parallel.test_plan_static import MEGATRON

MACHINE = Machine(peak_flops=1e11, link_bytes_per_s=1e9)


def _predict(plan: ParallelPlan, train: bool = True, machine: Machine = MACHINE) -> Prediction:
    torch.manual_seed(0)
    model = TinyTransformer()
    return predict(model_facts(model, [torch.randint(0, 128, (4, 16))]), plan, machine, model, train)


def test_each_term_follows_its_formula():
    single = _predict(ParallelPlan(mesh={"dp": 1, "tp": 1}))
    assert single.comm_bytes == 0 and single.collectives == 0
    params = sum(p.numel() for p in TinyTransformer().parameters()) * 4
    assert single.memory_bytes > 2 * params  # params and grads, plus the kept activations
    tp = _predict(ParallelPlan(mesh={"tp": 2}, tp=MEGATRON))
    assert tp.memory_bytes < single.memory_bytes and tp.compute_s < single.compute_s
    # per block: the rowwise outputs (proj, down) and each colwise input's gradient (q, k, v, up)
    assert tp.collectives == 2 * (2 + 4)
    fsdp = _predict(ParallelPlan(mesh={"dp": 2}, fsdp=FsdpSettings(units=["blocks.*"])))
    assert fsdp.memory_bytes < single.memory_bytes and abs(fsdp.compute_s - single.compute_s / 2) < 1e-12
    assert fsdp.comm_bytes > 0 and _predict(ParallelPlan(mesh={"dp": 1}), train=False).compute_s * 3 == (
        single.compute_s
    )


def test_ranks_sharing_fewer_cores_compute_on_their_share():
    plan = ParallelPlan(mesh={"dp": 4}, fsdp=FsdpSettings(units=["blocks.*"]))
    own = _predict(plan)  # a device a rank (cores=0)
    shared = _predict(plan, machine=Machine(peak_flops=1e11, link_bytes_per_s=1e9, cores=2))
    assert abs(shared.compute_s - 2 * own.compute_s) < 1e-12 and shared.comm_s == own.comm_s
    roomy = _predict(plan, machine=Machine(peak_flops=1e11, link_bytes_per_s=1e9, cores=8))
    assert roomy.compute_s == own.compute_s


def test_a_plan_over_the_memory_limit_is_named():
    p = _predict(ParallelPlan(mesh={"dp": 1, "tp": 1}))
    assert over_memory(p, None) is None and over_memory(p, p.memory_bytes) is None
    assert "per device, more than" in (over_memory(p, p.memory_bytes // 2) or "")


def test_calibration_fits_the_measured_steps():
    calib = Calibration()
    plans = [Prediction(0, 0.010, 0.002, 0, 1), Prediction(0, 0.004, 0.006, 0, 1), Prediction(0, 0.008, 0.001, 0, 1)]
    for p in plans:
        calib.add(p, 2 * p.compute_s + 3 * p.comm_s)  # this machine: twice slower compute, 3x the comm
    assert abs(calib.compute - 2) < 1e-6 and abs(calib.comm - 3) < 1e-6
    before, after = calib.error(calibrated=False), calib.error()
    assert before is not None and after is not None and after < 1e-6 < before
