"""Choosing the agents for a session: the built-in pair by default, LLM agents with ``--model``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from forge.agents.roles import Coder, Judge

if TYPE_CHECKING:
    from forge.harness.session import OptimizeOptions


def make_agents(op_path: Path, options: OptimizeOptions, device: str, backend: str) -> tuple[Coder, Judge, str]:
    """(coder, judge, agent name)."""
    if options.model:
        from forge.agents.llm import LLMClient, LLMCoder, LLMJudge

        coder = LLMCoder(LLMClient(options.model, options.api_base))
        judge = LLMJudge(LLMClient(options.judge_model or options.model, options.api_base))
        return coder, judge, "llm"
    from forge.agents.builtin import BuiltinCoder, BuiltinJudge

    builtin = BuiltinCoder(op_path, backend)
    return builtin, BuiltinJudge(builtin), "builtin"


def check_provider(options: OptimizeOptions) -> None:
    """With --model: fail now (ProviderError, exit 3) if a model cannot be reached or has no key."""
    if not options.model:
        if options.judge_model:
            from forge.errors import UsageError

            raise UsageError("--judge needs --model too (the built-in coder works with the built-in judge)")
        return
    from forge.agents.llm import check_model

    for model in dict.fromkeys([options.model, options.judge_model or options.model]):
        check_model(model, options.api_base)
