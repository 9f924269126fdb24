"""Applying a plan to a model on a device mesh with torch.distributed's own APIs
(``parallelize_module`` for tensor parallel, ``fully_shard`` for FSDP). It lives with the runtime
because ``bank.parallelize`` runs it in a user's program, and forge's real runs of a plan import it
from here: the code a plan is verified with is the code that applies it."""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module

from forge.core.parallel_plan import Layout, ParallelPlan, TpStyle, matched_modules

_PLACEMENT = {Layout.REPLICATE: Replicate(), Layout.SHARD_LAST: Shard(-1), Layout.SHARD_SEQUENCE: Shard(1)}


def plan_mesh(plan: ParallelPlan, device_type: str) -> DeviceMesh:
    """The mesh over (dp, tp) the plan names (sizes of 1 kept, so both names always exist)."""
    return init_device_mesh(device_type, (plan.degree("dp"), plan.degree("tp")), mesh_dim_names=("dp", "tp"))


def _style(style: TpStyle, input_layout: Layout | None, output_layout: Layout | None) -> Any:
    kw: dict[str, Any] = {}
    if input_layout is not None:
        kw["input_layouts"] = _PLACEMENT[input_layout]
    if output_layout is not None:
        kw["output_layouts"] = _PLACEMENT[output_layout]
    if style is TpStyle.COLWISE:
        return ColwiseParallel(**kw)
    if style is TpStyle.ROWWISE:
        return RowwiseParallel(**kw)
    return SequenceParallel()


def apply_plan(model: nn.Module, plan: ParallelPlan, mesh: DeviceMesh) -> nn.Module:
    """Shard ``model`` in place as ``plan`` says: tensor parallel over mesh["tp"], then FSDP over
    mesh["dp"] (its units first, the root last, as fully_shard wants)."""
    if plan.degree("tp") > 1 and plan.tp:
        styles = {
            name: _style(rule.style, rule.input_layout, rule.output_layout)
            for rule in plan.tp
            for name in matched_modules(model, rule.pattern)
        }
        parallelize_module(model, mesh["tp"], styles)
    if plan.fsdp is not None and plan.degree("dp") > 1:
        modules = dict(model.named_modules())
        units = {name for pattern in plan.fsdp.units for name in matched_modules(model, pattern)}
        for name in sorted(units, key=lambda n: -n.count(".")):  # innermost first, as fully_shard nests
            fully_shard(modules[name], mesh=mesh["dp"], reshard_after_forward=plan.fsdp.reshard_after_forward)
        fully_shard(model, mesh=mesh["dp"], reshard_after_forward=plan.fsdp.reshard_after_forward)
    return model
