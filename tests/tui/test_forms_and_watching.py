"""The new-session form's inline errors (the engine's own preflight messages), a session that a
separate `forge optimize` process runs showing up live, and a crash in a session worker becoming
a notification and a `crashed` session row, never a dead UI."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
from textual.widgets import Checkbox, Input, Label, Select, Static

import forge.harness
from forge.harness import events
from forge.present import SESSION_COLUMNS
from forge.tui.screens import NewSessionScreen, SessionListScreen
from forge.tui.screens.new_session import NewRun
from forge.tui.widgets import LiveTable
from tests.conftest import OPS
from tests.tui.helpers import make_app, record_notifications, text_of, wait_for

OP = OPS / "small_softmax.py"


@pytest.mark.asyncio
async def test_the_form_shows_the_engines_messages_beside_their_fields(tmp_path, fast_settings):
    app = make_app(tmp_path / "bank.db", fast_settings)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("n")
        form = app.screen
        assert isinstance(form, NewSessionScreen)
        form.query_one("#f-ops", Input).value = str(tmp_path / "nope.py")
        form.query_one("#f-backend", Select).value = "triton"
        form.query_one("#f-rounds", Input).value = "two"
        form.submit()
        await pilot.pause(0.2)
        assert "not a whole number" in text_of(form.query_one("#e-rounds", Label))
        form.query_one("#f-rounds", Input).value = "2"
        form.submit()
        await wait_for(pilot, lambda: bool(text_of(form.query_one("#e-ops", Label)).strip()), 30, "the checks")
        assert "no such op file" in text_of(form.query_one("#e-ops", Label))
        assert "needs a CUDA device" in text_of(form.query_one("#e-backend", Label))
        assert isinstance(app.screen, NewSessionScreen) and not app.runs.runs  # nothing started

        form.query_one("#f-ops", Input).value = str(OP)
        form.query_one("#f-backend", Select).value = "auto"
        form.query_one("#f-model", Input).value = "nosuchprovider/model"
        form.submit()
        await wait_for(pilot, lambda: bool(text_of(form.query_one("#e-model", Label)).strip()), 60, "the model check")
        assert text_of(form.query_one("#e-ops", Label)).strip() == ""
        assert not app.runs.runs


@pytest.mark.asyncio
async def test_the_forms_training_box_starts_a_training_session(tmp_path, fast_settings):
    app = make_app(tmp_path / "bank.db", fast_settings)
    started: list[NewRun] = []
    app.start_run = started.append  # type: ignore[method-assign,assignment]  # the form's part only
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("n")
        form = app.screen
        assert isinstance(form, NewSessionScreen)
        assert not form.query_one("#f-train", Checkbox).value  # inference unless asked
        form.query_one("#f-ops", Input).value = str(OP)
        form.query_one("#f-train", Checkbox).value = True
        form.submit()
        await wait_for(pilot, lambda: bool(started), 60, "the session's start")
    (run,) = started
    assert run.options.train and run.ops == [OP] and run.model_run is None


@pytest.mark.tui_live  # a whole session behind the TUI (15-25 s): in .ci/run's heavy run
@pytest.mark.asyncio
async def test_a_session_run_by_another_process_shows_up_and_updates(tmp_path, fast_settings):
    bank = tmp_path / "bank.db"
    env = {
        **os.environ,
        "FORGE_CACHE_DIR": str(fast_settings.cache_path()),
        "FORGE_COMPILE_BASELINE": "false",
        "FORGE_TIMING_BUDGET_S": "0.2",
        "FORGE_CONFIRM_TRIALS": "10",
    }
    cmd = [sys.executable, "-m", "forge", "optimize", str(OP), "--rounds", "2", "--bank", str(bank)]
    app = make_app(bank, fast_settings)
    async with app.run_test(size=(120, 40)) as pilot:
        sessions = app.screen
        assert isinstance(sessions, SessionListScreen)
        other = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            table = sessions.query_one(LiveTable)
            await wait_for(pilot, lambda: table.row_count == 1, 120, "the other process's session")
            statuses = set()

            def ended() -> bool:
                statuses.add(str(table.get_row_at(0)[SESSION_COLUMNS.index("status")]))
                return other.poll() is not None

            await wait_for(pilot, ended, what="the other process to finish")
            await pilot.pause(1.5)  # one more poll of the bank
            statuses.add(str(table.get_row_at(0)[SESSION_COLUMNS.index("status")]))
        finally:
            other.kill()
    assert "running" in statuses and statuses - {"running"}, statuses


@pytest.mark.asyncio
async def test_a_crash_in_a_session_worker_is_a_notification_and_a_crashed_row(tmp_path, fast_settings, monkeypatch):
    real = forge.harness.optimize

    def breaks_after_the_first_verdict(ops, options, settings, emit, control):  # type: ignore[no-untyped-def]
        def emit_then_fail(e: events.Event) -> None:
            emit(e)
            if isinstance(e, events.VerdictReady):
                raise RuntimeError("a bug in forge")

        return real(ops, options, settings, emit_then_fail, control)

    monkeypatch.setattr(forge.harness, "optimize", breaks_after_the_first_verdict)
    bank = tmp_path / "bank.db"
    app = make_app(bank, fast_settings, [OP], rounds=2)
    told = record_notifications(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: bool(app.runs.runs) and not app.runs.running(), what="the run to fail")
        await pilot.pause(0.3)
        assert any("a bug in forge" in t for t in told), told
        (summary,) = app.reader().sessions()
        assert str(summary.status) == "crashed"
        await pilot.press("b")  # the UI still answers
        await pilot.pause(0.2)
        assert app.is_running


@pytest.mark.tui_live  # a whole session behind the TUI (15-25 s): in .ci/run's heavy run
@pytest.mark.asyncio
async def test_an_llm_sessions_reply_streams_into_the_reply_tab(tmp_path, fast_settings):
    from benchmarks.support.llm_server import Script, serve
    from tests.harness.test_llm_session import RIGHT, judge_json

    script = Script(coder=[RIGHT], judge=[judge_json("done", go_on=False)], chunk_chars=6, chunk_delay_s=0.08)
    bank = tmp_path / "bank.db"
    with serve(script) as url:
        app = make_app(bank, fast_settings, [OPS / "loop_rowsum.py"], rounds=1, model="openai/test-model", api_base=url)
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.reader() is not None and bool(app.reader().sessions()), 60, "a session")
            app.open_session(app.reader().sessions()[0].id)
            shown: list[str] = []

            def streaming_seen() -> bool:
                body = app.screen.query("#llm-body")
                if body:
                    shown.append(text_of(body.first(Static)))
                return not app.runs.running()

            await wait_for(pilot, streaming_seen, what="the run to end")
    live = [t for t in shown if "CODER REPLY, round 1, arriving" in t]
    assert len(set(live)) >= 2, shown[-3:]  # seen more than once, growing as it arrives
    assert all(len(a) <= len(b) for a, b in itertools.pairwise(live))


@pytest.mark.asyncio
async def test_an_event_that_reaches_a_session_screen_before_it_mounts_is_dropped(tmp_path, fast_settings):
    """A run's events arrive on their own schedule: one that lands between a session screen's
    push and its mount (its widgets do not exist yet) must not crash the app; the mount reads
    the bank anyway."""
    from forge.db.engine import open_for_writing
    from forge.tui.screens import SessionScreen

    open_for_writing(tmp_path / "bank.db").dispose()  # an empty bank: the screen has a reader
    app = make_app(tmp_path / "bank.db", fast_settings)
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.reader() is not None
        screen = SessionScreen(1)
        app.push_screen(screen)
        assert not screen.is_mounted
        screen.engine_event(events.CandidateProposed("op", 1, round=1, attempt_id=1))
        screen.engine_event(events.ReplyProgress("op", 1, role="coder", round=1, text="so far"))
        await pilot.pause(0.3)
        assert screen.is_mounted and app.is_running
        assert "session 1" in text_of(screen.query_one("#totals", Static))
