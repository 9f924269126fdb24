"""Choosing the agents for a session: the built-in pair by default, LLM agents with a model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from forge.agents.plan_roles import PlanAdvisor, Planner
from forge.agents.roles import Coder, Judge
from forge.core.errors import UsageError
from forge.core.statuses import TextEnum


class AgentKind(TextEnum):
    BUILTIN = "builtin"
    LLM = "llm"


@dataclass(frozen=True)
class AgentChoice:
    """Which agents a session uses: LLMs named as litellm names them, or (no model) the built-in pair."""

    model: str | None = None
    judge_model: str | None = None  # default: the coder's model
    api_base: str | None = None  # an OpenAI-compatible server (vLLM, llama.cpp, Ollama)

    @property
    def kind(self) -> AgentKind:
        return AgentKind.LLM if self.model else AgentKind.BUILTIN


@dataclass(frozen=True)
class Agents:
    coder: Coder
    judge: Judge
    kind: AgentKind


def make_agents(
    op_path: Path,
    choice: AgentChoice,
    backend: str,
    train: bool = False,
    inductor: bool = True,
    wide_simd: bool = True,
) -> Agents:
    """The coder and judge for one op (``train``: kernels with their backward; ``inductor``: the
    built-in coder starts from Inductor's code for the op; ``wide_simd``: the CPU that verifies
    may run 512-bit vectors, or is not known)."""
    if choice.model:
        from forge.agents.llm import LLMClient, LLMCoder, LLMJudge

        coder = LLMCoder(LLMClient(choice.model, choice.api_base))  # told of training by its CoderContext
        judge = LLMJudge(LLMClient(choice.judge_model or choice.model, choice.api_base))
        return Agents(coder, judge, AgentKind.LLM)
    from forge.agents.builtin import BuiltinCoder, BuiltinJudge

    builtin = BuiltinCoder(op_path, backend, train, inductor_candidate=inductor, wide_simd=wide_simd)
    return Agents(builtin, BuiltinJudge(builtin), AgentKind.BUILTIN)


def check_provider(choice: AgentChoice) -> None:
    """With a model: fail now (ProviderError, exit 3) if it cannot be reached or has no key."""
    if not choice.model:
        if choice.judge_model:
            raise UsageError("--judge needs --model too (the built-in coder works with the built-in judge)")
        return
    from forge.agents.llm import check_model

    for model in dict.fromkeys([choice.model, choice.judge_model or choice.model]):
        check_model(model, choice.api_base)


@dataclass(frozen=True)
class PlanAgents:
    planner: Planner
    advisor: PlanAdvisor


def make_plan_agents(choice: AgentChoice) -> PlanAgents | None:
    """The LLM planner and advisor for a parallel-plan session; None without a model (the built-in
    search in ``forge.parallel`` plans then)."""
    if not choice.model:
        return None
    from forge.agents.llm import LLMClient, LLMPlanAdvisor, LLMPlanner

    planner = LLMPlanner(LLMClient(choice.model, choice.api_base))
    return PlanAgents(planner, LLMPlanAdvisor(LLMClient(choice.judge_model or choice.model, choice.api_base)))
