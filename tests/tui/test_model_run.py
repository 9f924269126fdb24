"""A model-level run from the TUI: started from the new-session form with its box ticked, its
stages shown as they happen, and its result (classes, four-way timing) on a screen of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Checkbox, DataTable, Input, Static

from forge.tui.screens import NewSessionScreen
from forge.tui.screens.model_run import ModelRunScreen
from tests.tui.helpers import make_app, record_notifications, text_of, wait_for

pytestmark = pytest.mark.tui_live  # a real model run from the TUI (minutes): in .ci/run's heavy run
# one class, two instances built alike, a chain of elementwise steps a fused kernel beats by construction
CHAINED = Path(__file__).resolve().parents[1] / "model_probe" / "models" / "chained.py"


@pytest.mark.asyncio
async def test_a_model_run_started_from_the_form_ends_on_its_result_screen(tmp_path, fast_settings, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the carved op files go under the working directory
    app = make_app(tmp_path / "bank.db", fast_settings, rounds=1)
    told = record_notifications(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("n")
        form = app.screen
        assert isinstance(form, NewSessionScreen)
        form.query_one("#f-ops", Input).value = str(CHAINED)
        form.query_one("#f-rounds", Input).value = "1"
        form.query_one("#f-modules", Checkbox).value = True
        form.submit()
        ended = lambda: isinstance(app.screen, ModelRunScreen) or any("forge failed" in t for t in told)  # noqa: E731
        await wait_for(pilot, ended, 600, "the model run's result")
        shown = app.screen
        assert isinstance(shown, ModelRunScreen), told
        line = text_of(shown.query_one("#model-line", Static))
        assert "chained.py:" in line and "1 of 1 ops banked" in line and "outputs match" in line, line
        classes = shown.query_one("#model-classes", DataTable)
        rows = [classes.get_row_at(i) for i in range(classes.row_count)]
        assert rows[0][0] == "chained:Chain" and rows[0][2] == "optimized", rows
        assert shown.query_one("#model-timings", DataTable).row_count == 2  # warm and cold
        ops = shown.query_one("#model-ops", DataTable)
        (op,) = [ops.get_row_at(i) for i in range(ops.row_count)]
        # its two chains are built alike: the one kernel banked, checked on both
        assert op[0] == "chained_Chain" and op[2] == "2 of 2", op
    assert any(": profiled:" in t for t in told) and any(": proven:" in t for t in told)
