"""The kernel bank: entries filtered by op, backend, device or confirmation; the selected entry's
details and source; re-verify it, export its op's kernels to a standalone bank, remove it."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Header, Input, Static, TabbedContent, TabPane

from forge import harness
from forge.core.errors import ForgeError
from forge.harness import KernelSummary
from forge.present import KERNEL_COLUMNS, evidence_line, kernel_cells, kernel_details
from forge.tui.screens.base import ForgeScreen
from forge.tui.widgets import AskText, ConfirmDialog, LiveTable


def matches(k: KernelSummary, text: str) -> bool:
    """The filter: each word is part of the op's name, or is its backend, device, status, or
    "confirmed" / "unconfirmed" / "saved" (by ``forge verify --save``)."""
    confirmed = {True: "confirmed", False: "unconfirmed", None: "saved"}[k.confirmed]
    exact = (k.backend, k.device, str(k.status), confirmed)
    return all(word in k.op.lower() or word in exact for word in text.split())


class BankScreen(ForgeScreen):
    POLL_S = 2.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("slash", "filter", "Filter"),
        Binding("v", "reverify", "Re-verify"),
        Binding("e", "export", "Export"),
        Binding("delete,D", "remove", "Remove"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        hint = "filter: op, backend, device, confirmed/unconfirmed/saved (every word must match)"
        yield Input(placeholder=hint, id="filter")
        yield LiveTable(KERNEL_COLUMNS, id="kernels")
        with TabbedContent(id="detail"):
            with TabPane("Details", id="details"), VerticalScroll():
                yield Static("", id="details-body")
            with TabPane("Source", id="source"), VerticalScroll():
                yield Static("", id="source-body")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "kernel bank"
        self.start_polling()
        self.query_one(LiveTable).focus()

    def refresh_data(self) -> None:
        reader = self.forge.reader()
        if reader is None:
            self.query_one("#details-body", Static).update("no bank yet: start a session (n on the sessions screen)")
            return
        text = self.query_one("#filter", Input).value.strip().lower()
        rows = [k for k in reader.kernels() if not text or matches(k, text)]
        self.query_one(LiveTable).show([(str(k.id), kernel_cells(k)) for k in rows])
        if not rows:
            self.query_one("#details-body", Static).update("no kernel matches" if text else "the bank is empty")

    def on_input_changed(self, _event: Input.Changed) -> None:
        self.refresh_data()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        reader = self.forge.reader()
        if reader is None or event.row_key.value is None:
            return
        try:
            k = reader.kernel(int(event.row_key.value))
        except ForgeError as exc:
            self.query_one("#details-body", Static).update(Text(exc.message, style="red"))
            return
        lines = [
            f"{key}: {value}" for key, value in kernel_details(k).items() if key not in ("reason_checks", "instances")
        ]
        lines.append(f"evidence: {evidence_line(k)}")
        self.query_one("#details-body", Static).update(Text("\n".join(lines)))
        self.query_one("#source-body", Static).update(Syntax(k.source, "python", line_numbers=True))

    def _selected(self) -> int | None:
        key = self.query_one(LiveTable).selected_key
        return int(key) if key is not None else None

    def action_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_reverify(self) -> None:
        kid = self._selected()
        if kid is not None:
            self.notify(f"re-verifying kernel {kid} on this machine…")
            self._reverify(kid)

    @work(thread=True, group="bank-action")
    def _reverify(self, kernel_id: int) -> None:
        try:
            (done,) = harness.bank_reverify(self.forge.bank, kernel_id, self.forge.settings)
        except ForgeError as exc:
            self.app.call_from_thread(self.notify, exc.message, severity="error")
            return
        v = done.verdict
        told = f"kernel {kernel_id}: {v.status}" + (f" ({v.reason})" if v.reason else "")
        self.app.call_from_thread(self.notify, told, severity="information" if v.passed else "error")

    def action_export(self) -> None:
        kid = self._selected()
        reader = self.forge.reader()
        if kid is None or reader is None:
            return
        op = reader.kernel(kid).summary.op

        def go(path: str | None) -> None:
            if path:
                try:
                    n = harness.bank_export(self.forge.bank, Path(path).expanduser(), [op])
                except ForgeError as exc:
                    self.notify(exc.message, severity="error")
                    return
                self.notify(f"exported {n} {op} kernel(s) to {path}")

        self.app.push_screen(AskText(f"Export the {op} kernels to a standalone bank file:", f"{op}.db"), go)

    def action_remove(self) -> None:
        kid = self._selected()
        if kid is None:
            return

        def go(yes: bool | None) -> None:
            if yes:
                try:
                    harness.bank_remove(self.forge.bank, kid)
                except ForgeError as exc:
                    self.notify(exc.message, severity="error")
                    return
                self.notify(f"removed kernel {kid}")
                self.refresh_data()

        self.app.push_screen(ConfirmDialog(f"Remove kernel {kid} from the bank? This cannot be undone.", "Remove"), go)
