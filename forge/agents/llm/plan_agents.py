"""The LLM roles of a parallel-plan session: a planner that replies with a plan as JSON, and an
advisor that reads the plan's measured and predicted step and says what to try next."""

from __future__ import annotations

import json

from forge.agents.llm.client import LLMClient
from forge.agents.plan_roles import PlanAdvice, PlanContext, PlanProposal, PlanTried, parse_plan

_SYSTEM = """You plan how a PyTorch model is spread over a device mesh with torch.distributed.
Reply with one JSON object (in a ```json block) that has these fields:
- "mesh": {"dp": int, "tp": int}, whose product is the world size;
- "tp": a list of {"pattern", "style", "input_layout"?, "output_layout"?}: "pattern" matches module
  names part by dotted part ("*" within one part, "[qkv]" a set), "style" is "colwise", "rowwise"
  or "sequence"; layouts are "replicate", "shard_last" or "shard_sequence";
- "fsdp": null or {"units": [patterns], "reshard_after_forward": bool}, needed when dp > 1;
- "note": one sentence on why.
A colwise Linear leaves its output sharded on the last dimension; the rowwise Linear after it takes
that and all-reduces. Nothing between them may need the whole hidden dimension (a norm would)."""


def _history(context: PlanContext) -> str:
    lines = []
    for t in context.history[-6:]:
        e = t.evidence
        plan = json.dumps(t.plan.to_json()) if t.plan is not None else "(no valid plan)"
        measured = f", measured {e.measured.step_ms:.2f} ms" if e.measured else ""
        predicted = f", predicted {e.prediction.step_ms:.2f} ms" if e.prediction else ""
        lines.append(f"- attempt {t.attempt_id}: {e.status}: {e.reason}{predicted}{measured}\n  {plan}")
    return "\n".join(lines) or "(none yet)"


def plan_prompt(context: PlanContext) -> str:
    mesh = f"(dp, tp) = {context.mesh}" if context.mesh else "your choice of (dp, tp)"
    memory = f"{context.memory_limit_gib} GiB per device" if context.memory_limit_gib else "no memory limit"
    advice = f"\nThe judge's advice after the last plan: {context.advice}\n" if context.advice else ""
    return (
        f"Model {context.model_name} ({'training step' if context.train else 'inference'}), "
        f"{context.world_size} ranks on {context.device}, mesh {mesh}, {memory}.\n\n"
        f"Source:\n```python\n{context.model_source}\n```\n\nModules (name, type, parameters, output):\n"
        f"{context.module_tree}\n\nPlans tried so far:\n{_history(context)}\n{advice}\n"
        "Propose the next plan: one you have not tried, that you expect to be faster and still exact."
    )


class LLMPlanner:
    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def propose(self, context: PlanContext) -> PlanProposal:
        user = plan_prompt(context)
        reply = self.client.complete([{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}])
        plan, error = parse_plan(reply.text)
        return PlanProposal(plan, error, user, reply.text, reply.tokens, reply.cost_usd, reply.cost_known)


class LLMPlanAdvisor:
    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def advise(self, context: PlanContext, tried: PlanTried) -> PlanAdvice:
        e = tried.evidence
        figures = [f"status {e.status}: {e.reason}"]
        if e.prediction:
            figures.append(
                f"predicted step {e.prediction.step_ms:.2f} ms (compute {e.prediction.compute_ms:.2f}, "
                f"communication {e.prediction.comm_ms:.2f}, {e.prediction.collectives} collectives), "
                f"{e.prediction.memory_bytes / 2**20:.1f} MiB per device"
            )
        if e.measured:
            figures.append(f"measured step {e.measured.step_ms:.2f} ms, peak {e.measured.peak_rss_mb:.0f} MiB a rank")
        plan = json.dumps(tried.plan.to_json()) if tried.plan is not None else "(no valid plan)"
        user = (
            f"Plan for {context.model_name} on {context.world_size} ranks: {plan}\n" + "\n".join(figures) + "\n\n"
            "In at most three sentences: why did it do this, and what plan should be tried next?"
        )
        system = "You review parallel plans for PyTorch models from their measured and predicted figures."
        reply = self.client.complete([{"role": "system", "content": system}, {"role": "user", "content": user}])
        return PlanAdvice(reply.text.strip()[:1000], user, reply.text, reply.tokens, reply.cost_usd, reply.cost_known)
