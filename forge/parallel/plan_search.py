"""The built-in plan search: every plan worth trying for a model on a world size, built from its
structure, then screened (static rules, cost model, memory limit) and ranked by predicted step.

Plans are built from what the model is, found by one forward pass on its sample inputs:
- tensor parallel, the Megatron pairing: in each module that calls two or more Linears, the last
  one called is row-wise and the others column-wise (q/k/v then the projection; up then down), so
  each pair needs one all-reduce. Numbered parts of names become ``*`` (``blocks.*.attn.q``), so
  one rule covers every layer. Each such group can be sharded or not: all groups, then each alone.
- FSDP (every ``dp > 1``): the children of each ``ModuleList`` are the units (``blocks.*``), or the
  root alone when there is none; resharding after forward or not.
- meshes: the one asked for, else every (dp, tp) whose product is the world size.

A plan the static rules refuse, or one over the memory limit, is kept with its reason (the
session records it); the rest are ranked by the cost model.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from forge.core.parallel_plan import FsdpSettings, ParallelPlan, TpRule, TpStyle
from forge.core.verdict import Check
from forge.parallel.cost_model import Machine, ModelFacts, Prediction, over_memory, predict
from forge.parallel.static_checks import forward_once, static_checks

_NUMBER = re.compile(r"^\d+$")


def _generalised(name: str) -> str:
    return ".".join("*" if _NUMBER.match(part) else part for part in name.split("."))


def _linear_call_order(model: nn.Module, inputs: Sequence[Any]) -> list[str]:
    order: list[str] = []
    hooks = [
        m.register_forward_pre_hook(lambda _m, _a, name=name: order.append(name))
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear)
    ]
    forward_once(model, inputs, hooks)
    return list(dict.fromkeys(order))


def tp_groups(model: nn.Module, inputs: Sequence[Any]) -> list[list[TpRule]]:
    """The Megatron pairs, one list of rules per generalised parent (``blocks.*.attn``)."""
    by_parent: dict[str, list[str]] = {}
    for name in _linear_call_order(model, inputs):
        by_parent.setdefault(name.rpartition(".")[0], []).append(name)
    groups: dict[str, list[TpRule]] = {}
    for parent, names in by_parent.items():
        key = _generalised(parent)
        if len(names) < 2 or key in groups:
            continue
        leaf = [_generalised(n) for n in names]
        rules = [TpRule(pattern=p, style=TpStyle.COLWISE) for p in leaf[:-1]]
        groups[key] = [*rules, TpRule(pattern=leaf[-1], style=TpStyle.ROWWISE)]
    return list(groups.values())


def fsdp_units(model: nn.Module) -> list[str]:
    return [f"{name}.*" for name, m in model.named_modules() if name and isinstance(m, nn.ModuleList) and len(m)]


def meshes(world_size: int, asked: tuple[int, int] | None) -> list[tuple[int, int]]:
    """(dp, tp) pairs: the one asked for, else every factorisation of the world size."""
    if asked is not None:
        return [asked]
    return [(world_size // tp, tp) for tp in range(1, world_size + 1) if world_size % tp == 0]


def _tp_choices(groups: list[list[TpRule]]) -> list[tuple[str, list[TpRule]]]:
    choices = [("all linear pairs", [r for g in groups for r in g])] if groups else []
    if len(groups) > 1:
        choices += [(f"{g[-1].pattern.rpartition('.')[0]} only", g) for g in groups]
    return choices


def candidate_plans(
    model: nn.Module, inputs: Sequence[Any], world_size: int, mesh: tuple[int, int] | None = None
) -> list[ParallelPlan]:
    """Every plan the search considers (before any check), in a stable order."""
    groups, units, plans = tp_groups(model, inputs), fsdp_units(model), []
    for dp, tp in meshes(world_size, mesh):
        tp_options = _tp_choices(groups) if tp > 1 else [("", [])]
        fsdp_options: list[FsdpSettings | None] = (
            [FsdpSettings(units=units, reshard_after_forward=r) for r in (True, False)] if dp > 1 else [None]
        )
        for (what, rules), fsdp in itertools.product(tp_options, fsdp_options):
            parts = [f"tp={tp}: {what}" if tp > 1 else ""]
            if fsdp is not None:
                over = ", ".join(fsdp.units) or "the whole model"
                parts.append(f"fsdp over {over}, {'reshard' if fsdp.reshard_after_forward else 'keep'} after forward")
            plans.append(
                ParallelPlan(mesh={"dp": dp, "tp": tp}, tp=rules, fsdp=fsdp, note="; ".join(p for p in parts if p))
            )
    return plans


@dataclass(frozen=True)
class Screened:
    """A plan after the cheap rungs: its static checks, prediction, and why it is refused (if so)."""

    plan: ParallelPlan
    checks: list[Check]
    prediction: Prediction | None
    refused: str | None


def screen(
    model: nn.Module,
    inputs: Sequence[Any],
    plan: ParallelPlan,
    facts: ModelFacts,
    machine: Machine,
    *,
    world_size: int,
    train: bool,
    memory_limit_bytes: int | None,
) -> Screened:
    """The static rules, then (when they pass) the cost model and the memory limit."""
    checks = static_checks(model, plan, world_size, inputs)
    failed = [c for c in checks if not c.passed]
    if failed:
        return Screened(plan, checks, None, "; ".join(f"{c.name}: {c.detail}" for c in failed))
    prediction = predict(facts, plan, machine, model, train=train)
    return Screened(plan, checks, prediction, over_memory(prediction, memory_limit_bytes))


def module_tree(model: nn.Module, inputs: Sequence[Any], limit: int = 80) -> str:
    """One line per module with parameters (name, type, parameter shapes, output shape), from one
    forward pass on the sample inputs: what a planner needs to know to write patterns."""
    outputs: dict[str, list[int]] = {}

    def keep_shape(name: str, out: Any) -> None:  # a forward hook returning a value replaces the output
        first = out[0] if isinstance(out, tuple | list) and out else out
        outputs.setdefault(name, list(first.shape) if isinstance(first, torch.Tensor) else [])

    hooks = [
        m.register_forward_hook(lambda _m, _a, out, name=name: keep_shape(name, out))
        for name, m in model.named_modules()
        if name
    ]
    forward_once(model, inputs, hooks)
    lines = []
    for name, m in model.named_modules():
        if not name:
            continue
        params = ", ".join(f"{p}{list(t.shape)}" for p, t in m.named_parameters(recurse=False))
        lines.append(
            f"{name}: {type(m).__name__}" + (f" ({params})" if params else "") + f" -> {outputs.get(name, [])}"
        )
    more = f"\n... {len(lines) - limit} more" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more
