"""The roles of a parallel-plan session and the values they exchange: a ``Planner`` proposes a
plan (as validated JSON) from a ``PlanContext``; a ``PlanAdvisor`` (the judge) reads a plan's
evidence, measured beside predicted, and says what to try next. Built-in plans come from
``forge.parallel``'s search; these roles are what an LLM plays."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import ValidationError

from forge.core.parallel_plan import ParallelPlan
from forge.core.plan_evidence import PlanEvidence


@dataclass(frozen=True)
class PlanTried:
    """An earlier plan as the agents see it: the plan (None: the reply held none) and its evidence."""

    attempt_id: int
    plan: ParallelPlan | None
    evidence: PlanEvidence


@dataclass
class PlanContext:
    model_name: str
    model_source: str
    module_tree: str  # one line per module: name, type, parameter shapes, output shape
    world_size: int
    mesh: tuple[int, int] | None  # (dp, tp) the user fixed, or None: the planner chooses
    train: bool
    device: str  # what the ranks run on, in words
    memory_limit_gib: float | None = None
    history: list[PlanTried] = field(default_factory=list)
    advice: str = ""  # the judge's last suggestion


@dataclass
class PlanProposal:
    plan: ParallelPlan | None
    error: str | None  # why the reply held no valid plan
    prompt: str
    response: str
    tokens: int = 0
    cost_usd: float | None = None
    cost_known: bool = True


@dataclass
class PlanAdvice:
    text: str
    prompt: str
    response: str
    tokens: int = 0
    cost_usd: float | None = None
    cost_known: bool = True


class Planner(Protocol):
    def propose(self, context: PlanContext) -> PlanProposal: ...


class PlanAdvisor(Protocol):
    def advise(self, context: PlanContext, tried: PlanTried) -> PlanAdvice: ...


_FENCED = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def parse_plan(reply: str) -> tuple[ParallelPlan | None, str | None]:
    """The plan in a reply (a fenced JSON block, else the outermost braces), or why there is none:
    JSON that does not parse, or fields the plan record refuses (named with their place)."""
    blocks = _FENCED.findall(reply)
    text = blocks[-1] if blocks else reply[reply.find("{") : reply.rfind("}") + 1]
    if not text.strip():
        return None, "the reply holds no JSON object"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"the plan's JSON does not parse ({exc.msg} at line {exc.lineno} column {exc.colno})"
    try:
        return ParallelPlan.from_json(data), None
    except ValidationError as exc:
        wrong = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'plan'}: {e['msg']}" for e in exc.errors()[:4])
        return None, f"the plan does not validate ({wrong})"
