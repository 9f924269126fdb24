"""The rows of forge's tables, built once for ``forge bank list`` (rich) and the TUI (DataTable):
each function gives one row's cells in the order of its ``*_COLUMNS``."""

from __future__ import annotations

from rich.text import Text

from forge.core.figures import AttemptFigures
from forge.core.statuses import AttemptRole
from forge.harness import Finding, KernelSummary, SessionSummary, StoredAttempt
from forge.present.formats import fmt_cost, fmt_ms, fmt_step, fmt_times, fmt_when, status_text

# "in rounds": the best of the search's own noisy timings; "kernel": what was banked, timed again after the choice
SESSION_COLUMNS = (
    "id",
    "op",
    "agent",
    "status",
    "attempts",
    "kernel",
    "best in rounds",
    "×compile",
    "cost",
    "strategy",
    "started",
)
ATTEMPT_COLUMNS = ("id", "round", "role", "backend", "status", "×eager", "×compile", "time")
KERNEL_COLUMNS = ("id", "op", "backend", "device", "dtype", "×eager", "×compile", "status", "agent")


def session_cells(s: SessionSummary) -> tuple[str | Text, ...]:
    agent = s.agent + (f" {s.model}" if s.model else "")
    kernel = f"#{s.kernel_id} {fmt_times(s.kernel_speedup_vs_eager)}" if s.kernel_id is not None else "—"
    return (
        str(s.id),
        s.op,
        agent,
        status_text(s.status),
        str(s.attempts),
        kernel,
        fmt_times(s.best_speedup_vs_eager),
        fmt_times(s.best_speedup_vs_compile),
        fmt_cost(s.cost_usd, s.tokens),
        s.strategy,
        fmt_when(s.started_at),
    )


def attempt_cells(a: StoredAttempt) -> tuple[str | Text, ...]:
    """An attempt's row; a judge row shows its advice's first words where the speedups would be."""
    v = a.verdict
    if a.role is AttemptRole.JUDGE:
        advice = a.feedback.next_step if a.feedback else (a.judge_error or "")
        advice = advice if len(advice) <= 24 else advice[:23] + "…"
        return (str(a.id), str(a.round), str(a.role), "", status_text(a.status), advice, "", "")
    if a.plan_evidence is not None:  # a parallel plan: its mesh, and its measured (else predicted) step
        e = a.plan_evidence
        step = fmt_step(e.measured.step_ms) if e.measured else "—"
        step = f"~{fmt_step(e.prediction.step_ms)}" if e.measured is None and e.prediction is not None else step
        return (str(a.id), str(a.round), str(a.role), e.mesh, status_text(a.status), "", "", step)
    figures = AttemptFigures.of(v) if v is not None else None
    time = fmt_ms(v.timings_ms.candidate) if v is not None else "—"
    eager = fmt_times(figures.speedup_vs_eager) if figures is not None else "—"
    compiled = fmt_times(figures.speedup_vs_compile) if figures is not None else "—"
    if figures is not None and figures.busy is not None:  # timed under load: no speedup is known
        eager, compiled = "busy", "busy"
    status = status_text(a.status)
    if a.role is AttemptRole.CONFIRM and v is not None and v.confirm_held is not None:
        status = status_text("held" if v.confirm_held else "not held")  # passing is not enough to be banked
    return (str(a.id), str(a.round), str(a.role), a.backend or "", status, eager, compiled, time)


def kernel_cells(k: KernelSummary) -> tuple[str | Text, ...]:
    return (
        str(k.id),
        k.op,
        k.backend,
        k.device + (f" {k.capability}" if k.capability else ""),
        k.dtype,
        fmt_times(k.speedup_vs_eager)
        + (" unconfirmed" if k.confirmed is False else "")
        + (" +train" if k.trains else ""),
        fmt_times(k.speedup_vs_compile) + (" eager only" if k.eager_only else ""),
        status_text(k.status),
        k.agent or "",
    )


def best_so_far(attempts: list[StoredAttempt]) -> list[float]:
    """The best speedup vs eager after each coder attempt (0 until one passes): the session's curve."""
    best, curve = 0.0, []
    for a in attempts:
        if a.role is AttemptRole.CODER:
            s = AttemptFigures.of(a.verdict).speedup_vs_eager if a.verdict is not None and a.verdict.passed else None
            best = max(best, s or 0.0)
            curve.append(best)
    return curve


FINDING_COLUMNS = ("", "finding", "what forge sees", "what to do")
_FINDING_MARKS = {True: ("ok", "green"), False: ("MISSING", "bold red"), None: ("·", "dim")}


def finding_cells(f: Finding) -> tuple[str | Text, ...]:
    """One ``forge doctor`` line: its mark, topic (``*``: the main job needs it), what forge sees,
    and what to do (only where something is missing or off)."""
    mark, style = _FINDING_MARKS[f.ok]
    return (Text(mark, style=style), f.topic + (" *" if f.needed else ""), f.detail, f.fix if f.ok is not True else "")
