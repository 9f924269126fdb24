"""One session, live: its attempts updating in place, the selected attempt's source, diff against
its parent, verdict, the judge's feedback, the LLM's prompt and reply; the best speedup over
attempts; running totals. Stop it, continue it with more rounds, or bank an attempt by hand
(through the same confirmation as the session's own finalists)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Header, Sparkline, Static, TabbedContent, TabPane

from forge.core.choices import Strategy
from forge.core.errors import ForgeError
from forge.core.statuses import AttemptRole, SessionStatus
from forge.harness import DEFAULT_ROUNDS, StoredAttempt, StoredSession, events, session_rounds
from forge.present import (
    ATTEMPT_COLUMNS,
    attempt_cells,
    best_so_far,
    fmt_cost,
    plan_evidence_renderable,
    source_diff,
    verdict_renderable,
)
from forge.tui.screens.base import ForgeScreen
from forge.tui.widgets import AskNumber, LiveTable

TABS = (("source", "Source"), ("diff", "Diff"), ("verdict", "Verdict"), ("judge", "Judge"), ("llm", "Prompt/Reply"))


class SessionScreen(ForgeScreen):
    POLL_S = 1.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("x", "stop", "Stop"),
        Binding("c", "continue_session", "Continue"),
        Binding("k", "bank_attempt", "Bank attempt"),
        *(Binding(str(i), f"tab('{key}')", title, show=False) for i, (key, title) in enumerate(TABS, 1)),
    ]

    def __init__(self, session_id: int) -> None:
        super().__init__()
        self.session_id = session_id
        self.stored: StoredSession | None = None
        self._shown_attempt: tuple[int, str] | None = None  # (id, status) in the tabs

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="totals")
        yield Sparkline([], id="curve")
        yield LiveTable(ATTEMPT_COLUMNS, id="attempts")
        with TabbedContent(id="tabs"):
            for key, title in TABS:
                with TabPane(title, id=key), VerticalScroll():
                    yield Static("", id=f"{key}-body")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"session {self.session_id}"
        self.start_polling()
        self.query_one(LiveTable).focus()

    def refresh_data(self) -> None:
        reader = self.forge.reader()
        if reader is None:
            return
        try:
            stored = self.stored = reader.session(self.session_id)
        except ForgeError as exc:
            self.query_one("#totals", Static).update(Text(exc.message, style="red"))
            return
        self.sub_title = f"session {stored.id} · {stored.problem_name} · {stored.agent} · {stored.status}"
        self.query_one("#totals", Static).update(self._totals(stored))
        self.query_one("#curve", Sparkline).data = best_so_far(stored.attempts) or [0.0]
        self.query_one(LiveTable).show([(str(a.id), attempt_cells(a)) for a in stored.attempts])
        self._show_selected()

    def _totals(self, s: StoredSession) -> Text:
        coder = [a for a in s.attempts if a.role in (AttemptRole.CODER, AttemptRole.PLAN)]
        best = max(best_so_far(s.attempts), default=0.0)
        steps = [a.plan_evidence.measured.step_ms for a in coder if a.plan_evidence and a.plan_evidence.measured]
        shown_best = f"best step {min(steps):.3g} ms" if steps else f"best {best:.2f}x eager"
        elapsed = _seconds(s.started_at, s.ended_at)
        rounds = session_rounds(s)
        live = self.forge.runs.of_session(s.id)
        elsewhere = "running elsewhere" if s.status is SessionStatus.RUNNING else str(s.status)
        where = "running here" if live else elsewhere
        left = live.limits_left(s.cost_usd) if live is not None else ""
        limits = f" · left: {left}" if left else ""
        return Text(
            f"{s.problem_name} · {where} · {len(coder)} attempts over {rounds} rounds · {shown_best} · "
            f"tokens {s.tokens} · cost {fmt_cost(s.cost_usd, s.tokens)} · {elapsed:.0f} s{limits}"
        )

    def engine_event(self, event: events.Event) -> None:
        """A streamed reply of this session goes to the Prompt/Reply tab as it arrives."""
        if not isinstance(event, events.ReplyProgress):
            super().engine_event(event)
        elif event.session_id == self.session_id and self.is_mounted:
            live = Text(f"{event.role.upper()} REPLY, round {event.round}, arriving…\n", style="bold cyan")
            # shown until the selection moves to another attempt (the poll leaves it alone till then)
            self.query_one("#llm-body", Static).update(Text.assemble(live, event.text))

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_selected()

    def _selected(self) -> StoredAttempt | None:
        key = self.query_one(LiveTable).selected_key
        if self.stored is None or key is None:
            return None
        return next((a for a in self.stored.attempts if str(a.id) == key), None)

    def _show_selected(self) -> None:
        a = self._selected()
        if a is None or self.stored is None or self._shown_attempt == (a.id, str(a.status)):
            return
        self._shown_attempt = (a.id, str(a.status))
        by_id = {x.id: x for x in self.stored.attempts}
        subject = by_id.get(a.parent_id) if a.role is not AttemptRole.CODER and a.parent_id else a
        parent = by_id.get(subject.parent_id) if subject and subject.parent_id else None
        source = subject.source if subject else None
        body = {
            "source": Syntax(source, "python", line_numbers=True) if source else Text("(no source)"),
            "diff": source_diff(parent.source if parent else None, source, f"attempt {parent.id}" if parent else ""),
            "verdict": self._verdict(a, subject),
            "judge": self._judge_text(a),
            "llm": Text(f"PROMPT\n{a.prompt or '(none: the built-in agent)'}\n\nREPLY\n{a.response or '(none)'}"),
        }
        for key, renderable in body.items():
            self.query_one(f"#{key}-body", Static).update(renderable)

    @staticmethod
    def _verdict(a: StoredAttempt, subject: StoredAttempt | None) -> RenderableType:
        """The row's own verdict (a confirmation has one), else the attempt it is about."""
        if a.plan_evidence is not None:
            return plan_evidence_renderable(a.plan_evidence)
        shown = a if a.verdict is not None else subject
        if shown is None or shown.verdict is None:
            return Text(a.reason or "not verified yet")
        return verdict_renderable(shown.verdict)

    def _judge_text(self, a: StoredAttempt) -> Text:
        if self.stored is None:
            return Text("")
        review = (
            a
            if a.role is AttemptRole.JUDGE
            else next((x for x in self.stored.attempts if x.role is AttemptRole.JUDGE and x.parent_id == a.id), None)
        )
        if review is None:
            return Text("no review of this attempt (yet)")
        if review.feedback is None:
            return Text(f"the judge gave no usable answer: {review.judge_error}", style="yellow")
        f = review.feedback
        return Text(
            f"diagnosis: {f.diagnosis}\nbottleneck: {f.bottleneck}\nnext step: {f.next_step}\n"
            f"continue: {'yes' if f.continue_search else 'no'}"
        )

    def action_tab(self, key: str) -> None:
        """Keys 1-5: the selected attempt's source, diff, verdict, judge, prompt/reply."""
        self.query_one(TabbedContent).active = key

    def action_stop(self) -> None:
        live = self.forge.runs.of_session(self.session_id)
        if live is None:
            self.notify("this session is not running in this TUI (stop it where it runs)", severity="warning")
            return
        live.control.stop()
        self.notify(f"stopping session {self.session_id}: it ends as interrupted and can be resumed")

    def action_continue_session(self) -> None:
        if self.forge.runs.of_session(self.session_id) is not None:
            self.notify("this session is still running", severity="warning")
            return
        rounds = session_rounds(self.stored) if self.stored is not None else DEFAULT_ROUNDS
        if self.stored is not None and self.stored.strategy == Strategy.PARALLEL:
            more = f"forge plan --resume {self.session_id} --rounds {rounds + 2}"
            self.notify(f"a parallel-plan session continues from the command line: {more}", severity="warning")
            return

        def go(more: str | None) -> None:
            if more is not None:
                self.forge.continue_session(self.session_id, rounds + int(more))

        self.app.push_screen(AskNumber(f"Continue session {self.session_id}: how many more rounds?", 4), go)

    def action_bank_attempt(self) -> None:
        a = self._selected()
        if a is None or a.role is not AttemptRole.CODER or a.verdict is None or not a.verdict.passed:
            self.notify("select a passed coder attempt to bank it", severity="warning")
            return
        if self.forge.runs.of_session(self.session_id) is not None:
            self.notify("stop the session first: banking by hand times the attempt again, alone", severity="warning")
            return
        self.forge.bank_attempt(self.session_id, a.id)


def _seconds(start: datetime | None, end: datetime | None) -> float:
    """Seconds from ``start`` to ``end`` (now while it runs); SQLite hands back naive UTC times."""
    if start is None:
        return 0.0
    end = end or datetime.now(UTC)
    utc = [t if t.tzinfo else t.replace(tzinfo=UTC) for t in (start, end)]
    return (utc[1] - utc[0]).total_seconds()
