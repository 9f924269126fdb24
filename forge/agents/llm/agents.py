"""The LLM coder and judge: prompts from templates, replies parsed robustly, costs counted.

A reply without a usable candidate is a failed attempt with its reason, never an exception. The
judge must answer JSON that fits ``JudgeFeedback``; an invalid answer is asked for once more, then
the session goes on without feedback.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from forge.agents.llm.client import LLMClient
from forge.agents.llm.prompts import (
    FittedSource,
    as_diff_from,
    change_from_previous,
    example,
    fit_source,
    op_shown,
    render,
    source_limit,
    standing,
)
from forge.agents.parsing import extract_candidates, parse_feedback
from forge.agents.roles import CoderContext, HistoryItem, MachineFacts, Proposal, Review
from forge.core.figures import AttemptFigures, judged_roofline
from forge.core.statuses import AttemptStatus
from forge.core.verdict import Verdict


def _device_line(device: str, facts: MachineFacts) -> str:
    if device == "cuda":
        return f"an NVIDIA GPU ({facts.gpu or 'CUDA'})"
    return f"a CPU ({facts.cpu_model or 'x86-64'}, {facts.cores or '?'} cores)"


def _streamed_to(context: CoderContext, role: str) -> Callable[[str], None] | None:
    """Where a streamed reply goes: the context's listener, told which role is speaking."""
    listener = context.on_reply
    if listener is None:
        return None
    return lambda text: listener(role, text)


def _last_source(last: HistoryItem | None, fastest: HistoryItem | None, limit: int) -> FittedSource | None:
    """The source of the attempt to build on: whole, or as a diff from the session's fastest
    attempt's where that one is shown whole too and the diff is the shorter."""
    if last is None:
        return None
    shown = fit_source(last.source, limit, last.error_text)
    return as_diff_from(fastest, last, shown) if fastest is not None else shown


def _fastest(history: list[HistoryItem]) -> HistoryItem | None:
    """The session's fastest passing attempt by its verdict's speedup, of those no match put
    behind another: where a round's candidates were timed together, the one the match chose
    stands for its round (each verdict is timed in its own noise, the match in one: a loser's
    own 5.2x beside the winner's 3.5x named the loser the fastest, and showed both kernels whole)."""
    decided = {h.round for h in history if h.matched is not None and h.matched.failed is None}
    timed = [
        h
        for h in history
        if h.status == AttemptStatus.PASSED and h.speedup_vs_eager and (h.round not in decided or h.matched is not None)
    ]
    return max(timed, key=lambda h: h.speedup_vs_eager or 0.0) if timed else None


def _sourced(h: HistoryItem) -> bool:
    """Whether ``h`` holds a candidate's source (a reply with no candidate holds the reply)."""
    return bool(h.source) and h.status != AttemptStatus.INVALID_REPLY


def _shown_ids(*items: HistoryItem | None) -> list[int]:
    """The attempts whose sources a coder prompt shows (whole or as a diff): what it may edit."""
    return [h.attempt_id for h in items if h is not None and _sourced(h) and h.attempt_id is not None]


def _built_on(history: list[HistoryItem], parent: HistoryItem | None) -> HistoryItem | None:
    """The attempt the prompt shows whole, to build on: the session's parent (a round's best of
    several candidates), else the last; where that is a reply with no candidate (an edit that did
    not apply), the attempt before it that has a source, so the next reply can edit it again."""
    chosen = [h for h in history if h is parent]
    last = chosen[0] if chosen else history[-1] if history else None
    if last is not None and last.status == AttemptStatus.INVALID_REPLY:
        sourced = [h for h in history if _sourced(h)]
        return sourced[-1] if sourced else last
    return last


def _editable(context: CoderContext) -> dict[int, str]:
    """The sources an ```edit block may change: every earlier attempt of the session with one (the
    prompt shows the one built on and the fastest; an edit of another applies where its SEARCH
    texts match)."""
    return {h.attempt_id: h.source for h in context.history if h.attempt_id is not None and _sourced(h)}


class LLMCoder:
    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def prompt(self, ctx: CoderContext) -> list[dict[str, str]]:
        facts = ctx.machine or MachineFacts(ctx.device)
        history = ctx.history[-6:]  # the recent trajectory; older attempts add tokens, not insight
        last = _built_on(history, ctx.parent)
        # the fastest passing attempt of the whole session, shown whole where it is not that one
        # (a judge's "go back to attempt N" needs its source)
        fastest = _fastest(ctx.history)
        fastest = None if fastest is None or fastest is last else fastest
        limit = source_limit(self.client.model)
        user = render(
            "coder.j2",
            op_name=ctx.op_name,
            op_source=op_shown(ctx.op_source),
            device_line=_device_line(ctx.device, facts),
            backend=ctx.backend,
            machine=facts,
            example=example(ctx.backend, ctx.op_source),
            history=history,
            brief=ctx.brief,
            last_source=_last_source(last, fastest, limit),
            shown_item=last,
            fastest=fastest,
            fastest_source=fit_source(fastest.source, limit) if fastest else None,
            standing=standing(ctx.history, ctx.brief),
            round=ctx.round,
            rounds=ctx.rounds,
            best_of=ctx.best_of,
            train=ctx.train,
            editable=_shown_ids(last, fastest),
        )
        return [{"role": "system", "content": render("coder_system.j2")}, {"role": "user", "content": user}]

    def propose(self, context: CoderContext) -> list[Proposal]:
        """``context.want`` requests; each reply's candidates (up to ``context.best_of`` of them),
        the request's tokens and cost carried by its first."""
        out = []
        for _ in range(context.want):
            messages = self.prompt(context)
            reply = self.client.complete(messages, on_text=_streamed_to(context, "coder"))
            got = extract_candidates(reply.text, context.best_of, _editable(context))
            for k, one in enumerate(got):
                of = f", candidate {k + 1} of {len(got)} in one reply" if len(got) > 1 else ""
                of += f", edits of attempt {one.edit_of}" if one.edit_of is not None else ""
                out.append(
                    Proposal(
                        one.source,
                        context.backend,
                        prompt=messages[-1]["content"],
                        response=reply.text,
                        error=one.reason,
                        # the request is charged once, with its first candidate
                        tokens=reply.tokens if k == 0 else 0,
                        cost_usd=reply.cost_usd if k == 0 else None,
                        cost_known=reply.cost_known if k == 0 else True,
                        note=f"{self.client.model}{of}",
                    )
                )
        return out


class LLMJudge:
    costs_tokens = True

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def review(self, context: CoderContext, verdict: Verdict) -> Review:
        item = context.parent
        assert item is not None  # the session passes the reviewed attempt as the context's parent
        user = render(
            "judge.j2",
            op_name=context.op_name,
            op_source=op_shown(context.op_source),
            backend=context.backend,
            device=context.device,
            item=item,
            candidate=fit_source(item.source, source_limit(self.client.model), item.error_text),
            change=change_from_previous(context.history, item),
            verdict=verdict,
            figures=AttemptFigures.of(verdict),
            roofline=judged_roofline(verdict),
            history=[h for h in context.history if h is not item][-8:],
            brief=context.brief,
            standing=standing(context.history, context.brief),
            rounds=context.rounds,
        )
        system = render("judge_system.j2", backend=context.backend)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        tokens, cost, known = 0, 0.0, True
        responses = []
        why = None
        for _try in range(2):
            reply = self.client.complete(messages, on_text=_streamed_to(context, "judge"))
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
