"""How a model-level run searches the model whole, beside its parts (pure logic).

The built-in agent can capture a whole model as one call (Inductor's code for all of it), which
fuses across its parts' boundaries. But each of that op's attempts compiles and times the whole
model, so its search costs what the model's depth costs, while its parts' searches cost what
their distinct layers cost. So the parts are searched first, and the model whole after them: with
the run's rounds where their kernels leave room for it (they run on less than ``COVERED`` of the
model's time, or one of them is slower than torch.compile's code for its part beyond
``AT_COMPILE``), and with one round where they cover the model at torch.compile's speed (a
whole-model kernel could add only the glue between them; the built-in agent's first attempt is
Inductor's code, the one that can). Every depth makes the same searches: whether the parts leave
room is a measured share near a threshold, and decides what a search costs, never whether it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from forge.harness.model_run.searches import CarvedOp, Searched, SearchPlan, model_stage, run_limits, search_ops

# of the model's time, the share its parts' kernels must run on: the rest, even 1.5x faster under
# a whole-model kernel (Inductor's gain on glue; it gains nothing on a head's matmul), would move
# the model by at most 1 / (0.8 + 0.2 / 1.5) = 1.07x, about the bar a null control sets here
COVERED = 0.8
AT_COMPILE = 0.95  # a part's kernel against torch.compile of its part, at least (within the noise)


@dataclass(frozen=True)
class WholeModelCall:
    """Whether the model's search after its parts takes the run's rounds (``room``: its parts
    leave room for it) or one round, and why."""

    room: bool
    reason: str


def outer_shares(parts: list[CarvedOp]) -> dict[str, float]:
    """Per part, the share of the model's time its kernel runs on where no other part's kernel
    runs around it (a decoder layer's kernel replaces its norms' and its attention's: only the
    final norm, outside every layer, is the norm kernel's own); parts with none are left out."""
    accepted = [p for p in parts if p.accepted and p.runs_on]
    around = [path for p in accepted for path in p.runs_on]
    shares: dict[str, float] = {}
    for p in accepted:
        members = {m.path: m.inclusive_ms for m in p.group.members}
        total = sum(members.values()) or 1.0
        own = [a for a in p.runs_on if not any(a.startswith(b + ".") for b in around)]
        if own:
            shares[p.group.name] = p.group.share * sum(members.get(a, 0.0) for a in own) / total
    return shares


def whole_model_call(parts: list[CarvedOp]) -> WholeModelCall:
    """Whether the parts' kernels (searched, checked on their instances) leave room for a
    whole-model kernel, and the words that say why."""
    shares = outer_shares(parts)
    covered = min(1.0, sum(shares.values()))
    if covered < COVERED:
        return WholeModelCall(True, f"its parts' kernels run on {covered:.1%} of its time, below {COVERED:.0%}")
    by_name = {p.group.name: p for p in parts}
    ratios = {n: r.speedup_vs_compile if (r := by_name[n].result) is not None else None for n in shares}
    unknown = [name for name, r in ratios.items() if r is None]
    if unknown:
        return WholeModelCall(True, f"{', '.join(unknown)}: not timed against torch.compile")
    known = {name: r for name, r in ratios.items() if r is not None}
    slow = [f"{name} ({r:.2f}x)" for name, r in known.items() if r < AT_COMPILE]
    if slow:
        return WholeModelCall(True, f"slower than torch.compile's code for their part: {', '.join(slow)}")
    return WholeModelCall(
        False,
        f"its parts' kernels run on {covered:.0%} of its time at torch.compile's speed or better "
        f"({min(known.values()):.2f}x-{max(known.values()):.2f}x compile): a whole-model kernel could add only the "
        "glue between them, and each of its attempts compiles and times the whole model (a cost that grows with "
        "its depth); --include with the model's class gives it the run's rounds",
    )


def search_parts_then_whole(carved: list[CarvedOp], root: str, forced: bool, plan: SearchPlan) -> Searched:
    """The run's searches: ``carved`` but its whole-model op (class ``root``) first, then that op,
    with the run's rounds where the parts leave room for it (or ``forced``: the user named the
    model's class) and one round where they do not, under one set of limits; with no part carved,
    the model alone is searched."""
    whole = next((c for c in carved if c.group.cls.key == root), None)
    parts = [c for c in carved if c is not whole]
    if whole is None or not parts:
        return search_ops(carved, plan)
    limits = run_limits(plan)
    done = search_ops(parts, plan, limits)
    if done.run.interrupted:
        return done
    call = WholeModelCall(True, "--include names the model's class") if forced else whole_model_call(done.ops)
    if call.room:
        whole.search_note = f"searched whole after its parts, the run's rounds: {call.reason}"
    else:
        whole.search_note = f"searched whole after its parts, one round: {call.reason}"
        plan = replace(plan, options=replace(plan.options, rounds=1))
    model_stage(plan, "carved", f"{whole.group.name}: {whole.search_note}")
    more = search_ops([whole], plan, limits)
    done.ops = more.ops + done.ops
    done.run.results += more.run.results
    done.run.skipped += more.run.skipped
    done.run.interrupted = more.run.interrupted
    done.run.tokens, done.run.cost_usd = more.run.tokens, more.run.cost_usd  # the shared limits' totals
    return done


__all__ = [
    "AT_COMPILE",
    "COVERED",
    "WholeModelCall",
    "outer_shares",
    "search_parts_then_whole",
    "whole_model_call",
]
