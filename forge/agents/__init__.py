"""Coder and judge roles, their values, and reply parsing (LLM and built-in implementations follow)."""

from forge.agents.parsing import Extracted, extract_candidate, parse_feedback
from forge.agents.roles import Coder, CoderContext, HistoryItem, Judge, JudgeFeedback, Proposal, Review

__all__ = [
    "Coder",
    "CoderContext",
    "Extracted",
    "HistoryItem",
    "Judge",
    "JudgeFeedback",
    "Proposal",
    "Review",
    "extract_candidate",
    "parse_feedback",
]
