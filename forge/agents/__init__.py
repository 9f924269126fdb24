"""The coder and judge roles and the values they exchange, the factory that picks a session's
agents (LLMs through litellm with a model, else the built-in offline pair), reply parsing, and the
planner and advisor roles of a parallel-plan session (``plan_roles``).
Implementations: ``agents.llm`` and ``agents.builtin`` (imported when chosen)."""

from forge.agents.edits import Edited, apply_edits
from forge.agents.factory import (
    AgentChoice,
    AgentKind,
    Agents,
    PlanAgents,
    check_provider,
    make_agents,
    make_plan_agents,
)
from forge.agents.parsing import Extracted, extract_candidate, extract_candidates, parse_feedback
from forge.agents.plan_roles import PlanAdvice, PlanContext, PlanProposal, PlanTried, parse_plan
from forge.agents.roles import Coder, CoderContext, Confirmation, HistoryItem, Judge, MachineFacts, Proposal, Review
from forge.core.feedback import JudgeFeedback

__all__ = [
    "AgentChoice",
    "AgentKind",
    "Agents",
    "Coder",
    "CoderContext",
    "Confirmation",
    "Edited",
    "Extracted",
    "HistoryItem",
    "Judge",
    "JudgeFeedback",
    "MachineFacts",
    "PlanAdvice",
    "PlanAgents",
    "PlanContext",
    "PlanProposal",
    "PlanTried",
    "Proposal",
    "Review",
    "apply_edits",
    "check_provider",
    "extract_candidate",
    "extract_candidates",
    "make_agents",
    "make_plan_agents",
    "parse_feedback",
    "parse_plan",
]
