"""``bank.parallelize(model, mesh)``: the best banked plan for this model on this mesh, applied.

A plan is picked by what it was made for: the model's structure (``structure_hash``: module
names and types, parameter shapes and dtypes), the world size, the device kind, training or
inference (an inference run may use a plan verified for training; not the other way round), and,
when the caller passes a mesh with ``dp``/``tp`` dimensions, that mesh's shape. No plan, or none
that still matches the model, leaves the model as it is with one warning (strict: an error).

This module loads torch.distributed and pydantic; ``runtime`` imports it only when a program asks
to parallelize, so ``import forge.kernelbank`` stays light for programs that only load kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from forge.bank_schema import PlanEntry, ReadOnlyBank
from forge.core.errors import KernelUnavailableError
from forge.core.parallel_plan import ParallelPlan, matched_modules, structure_hash
from forge.kernelbank import loader
from forge.kernelbank.plan_apply import apply_plan, plan_mesh

PLAN_ATTR = "_forge_plan"  # set on a parallelized model: the banked plan's id


@dataclass(frozen=True)
class MeshWanted:
    world_size: int
    device_kind: str
    shape: tuple[int, int] | None  # (dp, tp) when the caller's mesh names them


def _wanted(mesh: DeviceMesh | None) -> MeshWanted | str:
    if mesh is None:
        if not dist.is_available() or not dist.is_initialized():
            return "torch.distributed is not initialised (call init_process_group first, or pass a DeviceMesh)"
        kind = "cuda" if dist.get_backend() == "nccl" else "cpu"
        return MeshWanted(dist.get_world_size(), kind, None)
    names = tuple(mesh.mesh_dim_names or ())
    if mesh.ndim == 2 and names == ("dp", "tp"):
        return MeshWanted(mesh.size(), mesh.device_type, (mesh["dp"].size(), mesh["tp"].size()))
    return f"the mesh must have two dimensions named ('dp', 'tp'), or be None (got {mesh.ndim}D, names {names})"


def _fits(entry: PlanEntry, plan: ParallelPlan, model: nn.Module, wanted: MeshWanted) -> bool:
    if wanted.shape is not None and (plan.degree("dp"), plan.degree("tp")) != wanted.shape:
        return False
    return all(matched_modules(model, p) for p in plan.patterns())


def choose_plan(
    db: ReadOnlyBank, model: nn.Module, wanted: MeshWanted, train: bool
) -> tuple[PlanEntry, ParallelPlan] | str:
    """The plan to apply, or why there is none."""
    entries = db.plans(wanted.world_size, wanted.device_kind)
    modes = ("train",) if train else ("infer", "train")
    usable = sorted((e for e in entries if e.mode in modes), key=lambda e: modes.index(e.mode))
    where = f"{wanted.world_size} ranks on {wanted.device_kind}, {'training' if train else 'inference'}"
    if not usable:
        return f"the bank has no plan for {where}"
    digest = structure_hash(model)
    mine = [e for e in usable if e.structure_hash == digest]
    if not mine:
        ops = sorted({e.op_name for e in usable})
        return (
            f"the bank's plans for {where} ({', '.join(ops)}) were made for a model of another structure "
            "(a layer added, renamed or resized since?); run `forge plan MODEL.py` again"
        )
    for entry in mine:
        plan = ParallelPlan.model_validate_json(entry.plan_json)
        if _fits(entry, plan, model, wanted):
            return entry, plan
    return f"no plan for this model fits the mesh {wanted.shape} (dp, tp)"


def parallelize(
    db: ReadOnlyBank, model: nn.Module, mesh: DeviceMesh | None, *, train: bool, strict: bool
) -> int | None:
    """Apply the best banked plan to ``model`` in place; its id, or None when the model is left unsharded."""
    wanted = _wanted(mesh)
    choice = wanted if isinstance(wanted, str) else choose_plan(db, model, wanted, train)
    if isinstance(choice, str):
        if strict:
            raise KernelUnavailableError(f"parallelize: {choice}")
        loader.warn_once(
            f"plan:{db.where}:{choice}", f"forge kernel bank: {type(model).__name__} left unsharded: {choice}"
        )
        return None
    entry, plan = choice
    device_kind = mesh.device_type if mesh is not None else ("cuda" if torch.cuda.is_available() else "cpu")
    apply_plan(model, plan, mesh if mesh is not None else plan_mesh(plan, device_kind))
    model.__dict__[PLAN_ATTR] = entry.id
    return entry.id
