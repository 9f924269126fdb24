"""Every session in the bank, running ones updating live (including those another process runs),
filtered by op or status; open one, start one, resume one."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Input, Static

from forge.core.errors import ForgeError
from forge.present import SESSION_COLUMNS, session_cells
from forge.tui.screens.base import ForgeScreen
from forge.tui.widgets import LiveTable


class SessionListScreen(ForgeScreen):
    POLL_S = 1.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", show=False),
        Binding("n", "app.new_session", "New"),
        Binding("r", "resume", "Resume"),
        Binding("slash", "filter", "Filter"),
        Binding("b", "app.show_bank", "Bank"),
        Binding("d", "app.show_doctor", "Doctor"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="filter: op name or status (e.g. rmsnorm, running)", id="filter")
        yield LiveTable(SESSION_COLUMNS, id="sessions")
        yield Static("", id="empty", classes="hint")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "sessions"
        self.start_polling()
        self.query_one(LiveTable).focus()

    def refresh_data(self) -> None:
        reader = self.forge.reader()
        hint = self.query_one("#empty", Static)
        if reader is None:
            hint.update("no bank yet: press n to start a session (it creates the bank)")
            return
        try:
            rows = reader.sessions()
        except ForgeError as exc:
            hint.update(exc.message)
            return
        text = self.query_one("#filter", Input).value.strip().lower()
        if text:
            rows = [s for s in rows if text in s.op.lower() or text == str(s.status)]
        self.query_one(LiveTable).show([(str(s.id), session_cells(s)) for s in rows])
        hint.update("" if rows else ("no session matches the filter" if text else "no sessions yet: press n"))

    def on_input_changed(self, _event: Input.Changed) -> None:
        self.refresh_data()

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self.query_one(LiveTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.forge.open_session(int(str(event.row_key.value)))

    def action_open(self) -> None:
        key = self.query_one(LiveTable).selected_key
        if key is not None:
            self.forge.open_session(int(key))

    def action_resume(self) -> None:
        key = self.query_one(LiveTable).selected_key
        if key is not None:
            self.forge.resume_session(int(key))

    def action_filter(self) -> None:
        self.query_one("#filter", Input).focus()
