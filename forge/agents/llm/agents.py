"""The LLM coder and judge: prompts from templates, replies parsed robustly, costs counted.

A reply without a usable candidate is a failed attempt with its reason, never an exception. The
judge must answer JSON that fits ``JudgeFeedback``; an invalid answer is asked for once more, then
the session goes on without feedback.
"""

from __future__ import annotations

import json
from typing import Any

from forge.agents.llm.client import LLMClient
from forge.agents.llm.prompts import example, render
from forge.agents.parsing import extract_candidate, parse_feedback
from forge.agents.roles import CoderContext, Proposal, Review


def _device_line(ctx: CoderContext) -> str:
    spec = ctx.device_spec
    if ctx.device == "cuda":
        return f"an NVIDIA GPU ({spec.get('gpu', 'CUDA')})"
    return f"a CPU ({spec.get('cpu_model', 'x86-64')}, {spec.get('cores', '?')} cores)"


class LLMCoder:
    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def prompt(self, ctx: CoderContext) -> list[dict[str, str]]:
        user = render(
            "coder.j2",
            op_name=ctx.op_name,
            op_source=ctx.op_source,
            device_line=_device_line(ctx),
            backend=ctx.backend,
            device_spec=ctx.device_spec,
            example=example(ctx.backend, ctx.op_source),
            history=ctx.history[-6:],  # the recent trajectory; older attempts add tokens, not insight
        )
        return [{"role": "system", "content": render("coder_system.j2")}, {"role": "user", "content": user}]

    def propose(self, context: CoderContext) -> list[Proposal]:
        out = []
        for _ in range(context.want):
            messages = self.prompt(context)
            reply = self.client.complete(messages)
            got = extract_candidate(reply.text)
            out.append(
                Proposal(
                    got.source,
                    context.backend,
                    prompt=messages[-1]["content"],
                    response=reply.text,
                    error=got.reason,
                    tokens=reply.tokens,
                    cost_usd=reply.cost_usd,
                    cost_known=reply.cost_known,
                    note=f"{self.client.model}",
                )
            )
        return out


class LLMJudge:
    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def review(self, context: CoderContext, verdict: dict[str, Any]) -> Review:
        item = context.parent
        defaults: dict[str, Any] = {"status": "?", "reason": None, "checks": [], "timings_ms": {}, "roofline": None}
        verdict = {**defaults, "speedup_vs_eager": None, "speedup_vs_compile": None, "candidate_output": "", **verdict}
        assert item is not None  # the session passes the reviewed attempt as the context's parent
        user = render(
            "judge.j2",
            op_name=context.op_name,
            op_source=context.op_source,
            backend=context.backend,
            device=context.device,
            item=item,
            verdict=verdict,
            history=[h for h in context.history if h is not item][-8:],
        )
        messages = [{"role": "system", "content": render("judge_system.j2")}, {"role": "user", "content": user}]
        tokens, cost, known = 0, 0.0, True
        responses = []
        why = None
        for _try in range(2):
            reply = self.client.complete(messages)
            tokens += reply.tokens
            cost += reply.cost_usd or 0.0
            known &= reply.cost_known
            responses.append(reply.text)
            feedback, why = parse_feedback(reply.text)
            if feedback is not None:
                return Review(feedback, user, "\n---\n".join(responses), None, tokens, cost if known else None, known)
            messages = [
                *messages,
                {"role": "assistant", "content": reply.text},
                {"role": "user", "content": f"That answer was not usable ({why}). Reply with only the JSON object."},
            ]
        error = f"the judge's answer was unusable twice ({why}); going on without it"
        return Review(None, user, json.dumps(responses), error, tokens, cost if known else None, known)
