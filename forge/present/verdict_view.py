"""A verdict as forge shows it (``forge verify`` prints it; the TUI's verdict tab displays it), and
an attempt's source against its parent's."""

from __future__ import annotations

import difflib

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from forge.core.acceptance import null_bar, training_standing
from forge.core.figures import AttemptFigures
from forge.core.plan_evidence import PlanEvidence
from forge.core.verdict import Verdict
from forge.present.formats import fmt_step


def _checks(v: Verdict) -> Table:
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for c in v.checks:
        mark = "[green]pass[/]" if c.passed else ("[red]FAIL[/]" if c.fatal else "[yellow]warn[/]")
        detail = c.detail if len(c.detail) < 600 else c.detail[:600] + " …"
        table.add_row(c.name, mark, Text(detail))
    return table


def _timings(v: Verdict) -> list[RenderableType]:
    """The speed as the agents see it too (``AttemptFigures``: the paired ratios of the judged
    regime), then the evidence: the candidate's spread, the null control, the user loop."""
    stats = v.timing_stats
    if v.timings_ms.candidate is None:
        return []
    lines: list[RenderableType] = [Text("speed: " + AttemptFigures.of(v).sentence())]
    cand = stats.candidate
    if cand is not None and cand.q3_ms > 0:
        lines.append(Text(f"candidate spread: quartiles {cand.q1_ms:.4f}-{cand.q3_ms:.4f} ms over {cand.trials} calls"))
    null = stats.null_eager
    if null is not None:
        lines.append(
            Text(
                f"null control (the reference timed against itself in a clean worker): {null.median:.2f}x, 95% CI "
                f"{null.low:.2f}-{null.high:.2f}x over {null.pairs} pairs: the interval above must clear "
                f"{null_bar(null):.2f}x"
            )
        )
    lines += _user_loop(v)
    if v.training_step is not None or any(c.name == "gradients" for c in v.checks):
        standing = training_standing(v)
        lines.append(
            Text(("training: used under autograd: " if standing.used else "training: not used: ") + standing.why)
        )
    roof = v.roofline
    if roof is not None and roof.fraction_candidate is not None and roof.holds:
        lines.append(Text(f"roofline: the candidate reaches {roof.fraction_candidate:.0%} of this machine's bound"))
    elif roof is not None and roof.fraction_candidate is not None:
        lines.append(Text("roofline: the estimate does not hold for this op (a side ran past 100% of it)"))
    return lines


def _user_loop(v: Verdict) -> list[RenderableType]:
    loop, claim = v.user_loop, v.claim_pairs()[0]
    if loop is None or loop.eager is None or claim is None or not v.timing_meaningful:
        return []
    count = len(loop.processes) or 1
    where = "one process" if count == 1 else f"{count} fresh processes"
    return [
        Text(
            f"user loop (a plain loop in {where}, {loop.rounds} rounds each): {loop.eager.median:.2f}x eager, "
            f"{loop.eager.low:.2f}-{loop.eager.high:.2f}x{' across them' if count > 1 else ''}; the claim (the "
            f"lower of the two, with what a user's process reads): {claim.median:.2f}x, {claim.low:.2f}-"
            f"{claim.high:.2f}x"
        )
    ]


def verdict_renderable(v: Verdict) -> Group:
    """Header, the first failure, timings with their spread, roofline, then the checks, warnings,
    the candidate's captured output: what decides it first, the evidence after."""
    color = "green" if v.passed else "red"
    at = f" (instance {v.instance})" if v.instance is not None else ""  # a carved op's other instance
    parts: list[RenderableType] = [
        Text.from_markup(f"[bold]{v.problem}[/]{at} ← {v.candidate}  [{color} bold]{str(v.status).upper()}[/]"),
    ]
    if v.reason:
        parts.append(Text.assemble(("reason: ", "red"), v.reason))
    if v.confirm_held is not None:  # a finalist timed again: whether it may be banked, and why
        held = ("confirmation held: ", "green") if v.confirm_held else ("confirmation did not hold: ", "yellow")
        parts.append(Text.assemble(held, v.confirm_reason or ""))
    case = v.failing_case
    if case is not None and case.max_abs is not None:
        where = f"{case.id} {case.shape} ({case.inputs})"
        parts.append(Text(f"first failing case: {where}, max abs error {case.max_abs:.3g}"))
    parts += _timings(v)
    parts.append(_checks(v))
    parts += [Text.assemble(("warning: ", "yellow"), w) for w in v.warnings]
    if v.candidate_output.strip():
        parts += [Text("candidate output (captured):", style="dim"), Text(v.candidate_output.strip()[-1500:])]
    parts.append(Text(f"{v.cases} cases on {v.device} ({v.threads} threads), {v.elapsed_s:.1f} s", style="dim"))
    return Group(*parts)


def source_diff(parent: str | None, source: str | None, parent_name: str = "parent") -> Syntax:
    """The unified diff from ``parent``'s source to this one, highlighted ("no parent" when none)."""
    if source is None:
        return Syntax("(no source: the reply held no candidate)", "text")
    if parent is None:
        return Syntax("(no parent attempt: this is a first candidate)", "text")
    diff = difflib.unified_diff(
        parent.splitlines(keepends=True), source.splitlines(keepends=True), fromfile=parent_name, tofile="this attempt"
    )
    return Syntax("".join(diff) or "(identical to its parent)", "diff", word_wrap=False)


def plan_evidence_renderable(e: PlanEvidence) -> Group:
    """A parallel plan's ladder: the static rules, the prediction, the real run (``forge bank show
    --plan`` and the TUI's verdict tab)."""
    lines: list[RenderableType] = [Text(f"{e.status}: {e.reason}", style="bold")]
    for c in e.checks:
        lines.append(Text(f"  {'ok' if c.passed else 'FAILED'} {c.name}: {c.detail}"))
    if e.prediction is not None:
        p = e.prediction
        calibrated = f", calibrated {fmt_step(p.calibrated_step_ms)}" if p.calibrated_step_ms is not None else ""
        comm = f"communication {fmt_step(p.comm_ms)} in {p.collectives} collectives"
        lines.append(
            Text(
                f"  predicted: step {fmt_step(p.step_ms)} (compute {fmt_step(p.compute_ms)}, {comm})"
                f"{calibrated}, {p.memory_bytes / 2**20:.1f} MiB a device"
            )
        )
    if e.measured is not None:
        ranks = ", ".join(fmt_step(t) for t in e.measured.rank_step_ms)
        lines.append(
            Text(
                f"  measured: step {fmt_step(e.measured.step_ms)} (ranks {ranks}), "
                f"peak {e.measured.peak_rss_mb:.0f} MiB a rank"
            )
        )
    return Group(*lines)
