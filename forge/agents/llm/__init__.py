"""LLM agents through litellm: any provider litellm speaks, or a local OpenAI-compatible server."""

from forge.agents.llm.agents import LLMCoder, LLMJudge
from forge.agents.llm.client import Completion, LLMClient, check_model
from forge.agents.llm.plan_agents import LLMPlanAdvisor, LLMPlanner

__all__ = ["Completion", "LLMClient", "LLMCoder", "LLMJudge", "LLMPlanAdvisor", "LLMPlanner", "check_model"]
