"""A parallel-plan session in the TUI: its attempts show their mesh and measured step, the verdict
tab shows the plan's ladder (static rules, prediction, real run), and continuing it says how."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from forge.harness import PlanOptions, optimize_plan
from forge.tui.screens import SessionScreen
from forge.tui.widgets import LiveTable
from tests.tui.helpers import make_app, record_notifications, text_of, wait_for

MODEL = Path(__file__).parents[1] / "parallel" / "ops" / "tiny_transformer.py"


@pytest.mark.mesh  # a real plan session on a two-rank mesh (~13 s on 2 cores)
@pytest.mark.asyncio
async def test_a_plan_session_shows_its_ladder(tmp_path, fast_settings):
    bank = tmp_path / "bank.db"
    result = optimize_plan(MODEL, PlanOptions(world_size=2, rounds=1, bank=bank), fast_settings)
    assert result.plan_id is not None, result.reason
    app = make_app(bank, fast_settings)
    told = record_notifications(app)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.screen.query(LiveTable) and app.screen.query_one(LiveTable).row_count == 1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.query_one(LiveTable).row_count >= 1, what="the plan attempts")
        assert "best step" in text_of(screen.query_one("#totals", Static))
        await pilot.press("3")  # the verdict tab
        await pilot.pause(0.3)
        verdict = text_of(screen.query_one("#verdict-body", Static))
        assert "ok mesh" in verdict and "predicted: step" in verdict and "measured: step" in verdict
        await pilot.press("c")
        await pilot.pause(0.3)
    assert any("forge plan --resume" in t for t in told), told
