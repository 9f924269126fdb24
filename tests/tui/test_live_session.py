"""The TUI on the real engine and a real SQLite bank: a built-in session started from it runs
live to a banked kernel; its attempts, source, diff and verdict show; the kernel is on the bank
screen and exports; stop and continue; bank by hand; quit asks while a session runs."""

from __future__ import annotations

import sqlite3

import pytest
from textual.widgets import Static

from forge.harness import BankReader
from forge.tui.screens import BankScreen, SessionListScreen, SessionScreen
from forge.tui.widgets import AskNumber, AskText, ConfirmDialog, LiveTable
from tests.conftest import OPS
from tests.tui.helpers import make_app, record_notifications, text_of, wait_for

pytestmark = pytest.mark.tui_live  # sessions run from the TUI (minutes): in .ci/run's heavy run

OP = OPS / "small_softmax.py"
# ~8x eager: a shared machine's timing spikes cannot keep it from being banked
CHAIN = OPS / "pointwise_chain.py"


@pytest.mark.asyncio
async def test_a_session_runs_live_to_a_banked_kernel_that_the_bank_screen_exports(tmp_path, fast_settings):
    bank = tmp_path / "bank.db"
    app = make_app(bank, fast_settings, [CHAIN], rounds=2)
    async with app.run_test(size=(120, 40)) as pilot:
        sessions = app.screen
        assert isinstance(sessions, SessionListScreen)
        await wait_for(pilot, lambda: sessions.query_one(LiveTable).row_count == 1, what="the session's row")
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        seen_rows: set[int] = set()

        def attempts_seen() -> bool:
            seen_rows.add(screen.query_one(LiveTable).row_count)
            return not app.runs.running()

        await wait_for(pilot, attempts_seen, what="the run to end")
        assert len(seen_rows) > 2, "attempts should appear one after another while the session runs"
        reader = BankReader(bank)
        (summary,) = reader.sessions()
        assert summary.kernel_id is not None, summary
        stored = reader.session(summary.id)
        first = stored.attempts[0]
        screen.query_one(LiveTable).move_cursor(row=0)
        await pilot.pause(0.3)
        assert "class ModelNew" in text_of(screen.query_one("#source-body", Static))
        assert first.status == "passed" and "PASSED" in text_of(screen.query_one("#verdict-body", Static))
        assert "first candidate" in text_of(screen.query_one("#diff-body", Static))
        coder = [a for a in stored.attempts if str(a.role) == "coder"]
        await pilot.press(*["down"] * stored.attempts.index(coder[1]))
        await pilot.pause(0.3)
        assert "@@" in text_of(screen.query_one("#diff-body", Static))  # a diff against its parent

        await pilot.press("b")
        bank_screen = app.screen
        assert isinstance(bank_screen, BankScreen)
        await wait_for(pilot, lambda: bank_screen.query_one(LiveTable).row_count == 1, what="the banked kernel")
        await pilot.pause(0.3)
        assert "binds to instances" in text_of(bank_screen.query_one("#details-body", Static))
        await pilot.press("e")
        assert isinstance(app.screen, AskText)
        out = tmp_path / "shipped.db"
        app.screen.query_one("#answer").value = str(out)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause(0.3)
        with sqlite3.connect(out) as db:
            assert db.execute("SELECT count(*) FROM kernels").fetchone() == (1,)
        reader.close()


@pytest.mark.asyncio
async def test_stop_then_continue_then_bank_by_hand(tmp_path, fast_settings):
    bank = tmp_path / "bank.db"
    app = make_app(bank, fast_settings, [CHAIN], rounds=3)
    told = record_notifications(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.reader() is not None and len(app.reader().sessions()) == 1, what="a session")
        sid = app.reader().sessions()[0].id
        app.open_session(sid)
        await pilot.pause(0.2)
        await wait_for(pilot, lambda: app.reader().sessions()[0].attempts >= 1, what="a first attempt")
        await pilot.press("x")
        await wait_for(pilot, lambda: not app.runs.running(), 120, "the stop")
        assert str(app.reader().session(sid).status) == "interrupted"

        await pilot.press("c")
        assert isinstance(app.screen, AskNumber)
        app.screen.query_one("#answer").value = "1"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(app.runs.running()), 10, "the continued run")
        await wait_for(pilot, lambda: not app.runs.running(), what="the continued run to end")
        stored = app.reader().session(sid)
        # the fused chain (~8x eager) banks: the continued session ends finished
        assert str(stored.status) == "finished" and stored.settings["rounds"] == 4, stored.status

        coder = [a for a in stored.attempts if str(a.role) == "coder" and a.verdict and a.verdict.passed]
        passed = [a for a in coder if (a.verdict.speedup_vs_eager or 0) > 1]  # what a confirmation may bank
        assert passed, "the fused chain beats eager at the median"
        table = app.screen.query_one(LiveTable)
        table.move_cursor(row=[a.id for a in stored.attempts].index(passed[0].id))
        confirms_before = sum(str(a.role) == "confirm" for a in stored.attempts)
        await pilot.press("k")
        await wait_for(pilot, lambda: bool(app.runs.running()) or "banked" in told[-1], 10, f"confirming: {told}")
        await wait_for(pilot, lambda: not app.runs.running(), what="the confirmation to end")
        after = app.reader().session(sid)
        confirms = [a for a in after.attempts if str(a.role) == "confirm"]
        assert len(confirms) > confirms_before and confirms[-1].parent_id == passed[0].id
        assert confirms[-1].verdict is not None and confirms[-1].verdict.confirm_held, confirms[-1].verdict
        assert after.status == stored.status  # banking by hand keeps the session's own status


@pytest.mark.asyncio
async def test_quit_asks_while_a_session_runs_and_stops_it_cleanly(tmp_path, fast_settings):
    bank = tmp_path / "bank.db"
    app = make_app(bank, fast_settings, [OP], rounds=8)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.reader() is not None and bool(app.reader().sessions()), what="a session")
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.runs.running(), 120, "the running session to stop")
        await pilot.pause(0.5)  # the app exits once it sees the run ended
    assert app.return_code == 0
    with sqlite3.connect(bank) as db:
        assert db.execute("SELECT status FROM sessions").fetchall() == [("interrupted",)]
