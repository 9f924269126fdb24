"""``forge doctor`` as a screen: what this machine gives forge (measured in a thread worker)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Static

from forge import harness
from forge.present import FINDING_COLUMNS, finding_cells
from forge.tui.screens.base import ForgeScreen


class DoctorScreen(ForgeScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "recheck", "Check again"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._findings: list[harness.Finding] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("checking this machine…", id="verdict")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="findings")
        yield Static("", id="finding", classes="hint")  # the selected line in full, wrapped
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "doctor"
        table = self.query_one(DataTable)
        table.add_columns(*FINDING_COLUMNS)
        self.action_recheck()

    def action_recheck(self) -> None:
        self.query_one("#verdict", Static).update("checking this machine…")
        self._check()

    @work(thread=True, exclusive=True, group="doctor")
    def _check(self) -> None:
        report = harness.doctor(self.forge.settings, self.forge.bank, self.forge.api_bases)
        self.app.call_from_thread(self._show, report)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        findings = self._findings
        if 0 <= event.cursor_row < len(findings):
            f = findings[event.cursor_row]
            fix = f"\nwhat to do: {f.fix}" if f.fix and f.ok is not True else ""
            self.query_one("#finding", Static).update(Text(f"{f.topic}: {f.detail}{fix}"))

    def _show(self, report: harness.DoctorReport) -> None:
        self._findings = report.findings
        table = self.query_one(DataTable)
        table.clear()
        for f in report.findings:
            table.add_row(*finding_cells(f))
        ok = "forge can run its main job here" if report.can_run else "forge cannot run here yet"
        self.query_one("#verdict", Static).update(
            Text(f"{ok} (* = needed for it)", style="green" if report.can_run else "bold red")
        )
