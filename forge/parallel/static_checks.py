"""The static rules, cheapest first: each is a named ``Check`` (passed or not, and why).

- ``mesh``: the mesh's sizes multiply to the world size; the batch splits over dp; data
  parallelism comes with FSDP (forge
  shards data-parallel ranks with it; without it they would not share gradients); pipeline
  stages have microbatches to overlap, and the sequence splits evenly over context parallelism.
- ``patterns``: every pattern (tp, FSDP units, checkpointing) matches at least one module, and no
  module gets two tensor-parallel rules.
- ``styles``: colwise/rowwise go on Linear or Embedding modules, sequence parallel on norms and
  dropout.
- ``divisible``: what a style splits divides by the tp degree (a Linear's out or in features, an
  Embedding's dimension or vocabulary, attention heads, the sequence).
- ``layouts``: in the order one forward pass on the sample inputs calls them (hooks, on this
  process's CPU, no distribution), each planned module's output layout is what the next planned
  module takes as input; modules called on the same input tensor (q, k, v) count as one step.

Passing them says a plan can be applied, not that it computes the right thing (a colwise output
normalised over its sharded hidden dimension passes here and fails the real run).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from forge.core.parallel_plan import ParallelPlan, TpRule, TpStyle, matched_modules
from forge.core.verdict import Check

_NORMS = (nn.LayerNorm, nn.RMSNorm, nn.Dropout, nn.GroupNorm)
_HEAD_ATTRS = ("num_heads", "n_heads", "n_head", "num_attention_heads")


def forward_once(model: nn.Module, inputs: Sequence[Any], hooks: list[RemovableHandle]) -> None:
    """One forward pass without gradients, for the ``hooks`` just registered to observe; they are
    removed afterwards, whatever happens."""
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for hook in hooks:
            hook.remove()


def _mesh(plan: ParallelPlan, world_size: int, inputs: Sequence[Any]) -> Check:
    problems = []
    if plan.world_size != world_size:
        problems.append(f"the mesh {plan.mesh} has {plan.world_size} ranks, the world size is {world_size}")
    if plan.degree("pp") > 1 and plan.microbatches < plan.degree("pp"):
        problems.append(f"{plan.degree('pp')} pipeline stages need at least as many microbatches ({plan.microbatches})")
    if plan.degree("dp") > 1 and plan.fsdp is None:
        problems.append(
            f"dp={plan.degree('dp')} without fsdp: the data-parallel ranks would never share their "
            "gradients; name FSDP units (fsdp.units, e.g. the blocks)"
        )
    batch = next((int(x.shape[0]) for x in inputs if hasattr(x, "shape") and len(x.shape) >= 1), None)
    if plan.degree("dp") > 1 and batch is not None and batch % plan.degree("dp"):
        problems.append(f"the batch ({batch}) does not split over dp={plan.degree('dp')}")
    seq = _sequence_length(inputs)
    if plan.degree("cp") > 1 and seq is not None and seq % plan.degree("cp"):
        problems.append(f"the sequence ({seq}) does not split over cp={plan.degree('cp')}")
    return Check(name="mesh", passed=not problems, detail="; ".join(problems) or f"{plan.mesh} = {world_size} ranks")


def _patterns(model: nn.Module, plan: ParallelPlan) -> Check:
    problems: list[str] = []
    owner: dict[str, str] = {}
    named = [("tp", r.pattern) for r in plan.tp] + [("checkpoint", p) for p in plan.checkpoint]
    named += [("fsdp unit", p) for p in (plan.fsdp.units if plan.fsdp else [])]
    for kind, pattern in named:
        if not matched_modules(model, pattern):
            problems.append(f"{kind} pattern {pattern!r} matches no module")
    for rule in plan.tp:
        for name in matched_modules(model, rule.pattern):
            if name in owner:
                problems.append(f"{name!r} is matched by both {owner[name]!r} and {rule.pattern!r}")
            owner[name] = rule.pattern
    return Check(name="patterns", passed=not problems, detail="; ".join(problems) or "every pattern matches")


def _styles(model: nn.Module, plan: ParallelPlan) -> Check:
    modules, problems = dict(model.named_modules()), []
    for rule in plan.tp:
        for name in matched_modules(model, rule.pattern):
            kind = type(modules[name]).__name__
            if rule.style is TpStyle.SEQUENCE and not isinstance(modules[name], _NORMS):
                problems.append(f"{name} ({kind}): sequence parallel is for norms and dropout")
            if rule.style is not TpStyle.SEQUENCE and not isinstance(modules[name], nn.Linear | nn.Embedding):
                problems.append(f"{name} ({kind}): {rule.style} splits a Linear or an Embedding")
    return Check(name="styles", passed=not problems, detail="; ".join(problems) or "each style fits its modules")


def _split_size(module: nn.Module, style: TpStyle) -> tuple[str, int] | None:
    """What ``style`` splits in ``module``, and its size."""
    colwise = style is TpStyle.COLWISE
    if isinstance(module, nn.Linear):
        return ("out_features", module.out_features) if colwise else ("in_features", module.in_features)
    if isinstance(module, nn.Embedding):
        return ("embedding_dim", module.embedding_dim) if colwise else ("vocabulary", module.num_embeddings)
    return None


def _divisible(model: nn.Module, plan: ParallelPlan, inputs: Sequence[Any]) -> Check:
    tp, modules, problems = plan.degree("tp"), dict(model.named_modules()), []
    for rule in plan.tp:
        for name in matched_modules(model, rule.pattern):
            split = _split_size(modules[name], rule.style)
            if split is not None and split[1] % tp:
                problems.append(f"{name}: {split[0]} {split[1]} does not split over tp={tp}")
            parent = modules[name.rpartition(".")[0]] if "." in name else model
            heads = next((getattr(parent, a) for a in _HEAD_ATTRS if isinstance(getattr(parent, a, None), int)), None)
            if rule.style is TpStyle.COLWISE and heads is not None and heads % tp:
                problems.append(f"{name}: its {heads} attention heads do not split over tp={tp}")
    seq = _sequence_length(inputs)
    if any(r.style is TpStyle.SEQUENCE for r in plan.tp) and seq is not None and seq % tp:
        problems.append(f"sequence parallel: the sequence ({seq}) does not split over tp={tp}")
    return Check(name="divisible", passed=not problems, detail="; ".join(problems) or f"every split divides by {tp}")


def _layouts(model: nn.Module, plan: ParallelPlan, inputs: Sequence[Any]) -> Check:
    rule_of: dict[str, TpRule] = {}
    for rule in plan.tp:
        for name in matched_modules(model, rule.pattern):
            rule_of.setdefault(name, rule)
    problems = []
    for (before, r1), (after, r2) in itertools.pairwise(_steps(model, rule_of, inputs)):
        out_layout, in_layout = r1.layouts()[1], r2.layouts()[0]
        if out_layout is not in_layout:
            problems.append(f"{before} leaves its output {out_layout}, {after} takes its input {in_layout}")
    return Check(name="layouts", passed=not problems, detail="; ".join(problems) or "consecutive layouts agree")


def _steps(model: nn.Module, rule_of: dict[str, TpRule], inputs: Sequence[Any]) -> list[tuple[str, TpRule]]:
    """The planned modules in the order one forward pass calls them (registration order when the
    model cannot run on ``inputs`` here). Modules called one after another on the same input
    tensor (q, k, v) read it side by side: one step of the chain."""
    calls: list[tuple[str, int]] = []
    hooks = [
        module.register_forward_pre_hook(lambda _m, args, name=name: calls.append((name, _input_id(args))))
        for name, module in model.named_modules()
        if name in rule_of
    ]
    try:
        forward_once(model, inputs, hooks)
    except Exception:  # a model that needs a GPU or other inputs: judge the registration order
        calls = [(name, i) for i, (name, _m) in enumerate(model.named_modules()) if name in rule_of]
    steps: list[tuple[str, TpRule]] = []
    for i, (name, source) in enumerate(calls):
        if i and source == calls[i - 1][1] and _same_step(steps[-1][1], rule_of[name]):
            continue
        steps.append((name, rule_of[name]))
    return steps


def _input_id(args: tuple[Any, ...]) -> int:
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    return first.data_ptr() if first is not None else id(args)


def _same_step(a: TpRule, b: TpRule) -> bool:
    return a.style is b.style and a.layouts() == b.layouts()


def _sequence_length(inputs: Sequence[Any]) -> int | None:
    """Dimension 1 of the first input with at least two dimensions (batch, sequence, ...)."""
    shaped = [x for x in inputs if hasattr(x, "shape") and len(x.shape) >= 2]
    return int(shaped[0].shape[1]) if shaped else None


def static_checks(model: nn.Module, plan: ParallelPlan, world_size: int, inputs: Sequence[Any] = ()) -> list[Check]:
    """Every static rule's result for ``plan`` on ``model`` (built, on any device) and its inputs."""
    return [
        _mesh(plan, world_size, inputs),
        _patterns(model, plan),
        _styles(model, plan),
        _divisible(model, plan, inputs),
        _layouts(model, plan, inputs),
    ]
