"""``forge tui``: the Textual app. Screens render what the engine and the bank say; every action
calls the engine (``forge.harness``): runs go to thread workers (``runs``), reads to a read-only
``BankReader`` that holds no lock between polls."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from forge import harness
from forge.core.errors import ForgeError
from forge.core.paths import bank_or_default
from forge.core.settings import ForgeSettings
from forge.present import model_line
from forge.tui.messages import EngineEvent, ModelRunEnded, RunEnded
from forge.tui.runs import LiveRun, LiveRuns
from forge.tui.screens import (
    BankScreen,
    DoctorScreen,
    HelpScreen,
    NewSessionScreen,
    SessionListScreen,
    SessionScreen,
)
from forge.tui.screens.base import ForgeScreen
from forge.tui.screens.model_run import ModelRunScreen
from forge.tui.screens.new_session import NewRun
from forge.tui.widgets import ConfirmDialog


@dataclass(frozen=True)
class TuiLaunch:
    """What ``forge tui`` was started with: op files to run at once (none: the sessions screen),
    the optimize options for them and for the form's defaults, and the settings."""

    ops: list[Path] = field(default_factory=list)
    options: harness.OptimizeOptions = field(default_factory=lambda: harness.OptimizeOptions())
    settings: ForgeSettings = field(default_factory=ForgeSettings)


class ForgeApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "forge"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "request_quit", "Quit"),
        Binding("f1", "help", "Help"),
        Binding("s", "show_sessions", "Sessions", show=False),
        Binding("b", "show_bank", "Bank", show=False),
        Binding("d", "show_doctor", "Doctor", show=False),
        Binding("n", "new_session", "New session", show=False),
    ]

    def __init__(self, launch: TuiLaunch | None = None) -> None:
        super().__init__()
        self.launch = launch or TuiLaunch()
        self.settings = self.launch.settings
        self.bank = bank_or_default(self.launch.options.bank)
        self.api_bases = (self.launch.options.api_base,) if self.launch.options.api_base else ()
        self.runs = LiveRuns(self.settings, self.post_message)
        self._reader: harness.BankReader | None = None

    # -- the bank, read-only -------------------------------------------------------------
    def reader(self) -> harness.BankReader | None:
        """The bank's reader, once the bank exists (a first run creates it)."""
        if self._reader is None:
            try:
                if not harness.bank_exists(self.bank):
                    return None
                self._reader = harness.BankReader(self.bank)
            except ForgeError as exc:
                self.notify(exc.message, severity="error", timeout=10)
                return None
        return self._reader

    # -- start-up and screens ------------------------------------------------------------
    def on_mount(self) -> None:
        self.push_screen(SessionListScreen())
        if self.launch.ops:
            self.start_run(NewRun(self.launch.ops, replace(self.launch.options, resume=None)))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Sessions", "every session in the bank", self.action_show_sessions)
        yield SystemCommand("Kernel bank", "kernels, details, re-verify, export, remove", self.action_show_bank)
        yield SystemCommand("New session", "start optimizing an op", self.action_new_session)
        yield SystemCommand("Doctor", "what this machine gives forge", self.action_show_doctor)
        yield SystemCommand("Help", "the keys", self.action_help)
        if isinstance(screen, SessionScreen):
            yield SystemCommand("Stop session", "stop it cleanly (resumable)", screen.action_stop)
            yield SystemCommand("Continue session", "run more rounds", screen.action_continue_session)
            yield SystemCommand("Bank attempt", "confirm and bank the selected attempt", screen.action_bank_attempt)
        if isinstance(screen, SessionListScreen):
            yield SystemCommand("Resume session", "continue the selected interrupted session", screen.action_resume)
        if isinstance(screen, BankScreen):
            yield SystemCommand("Re-verify kernel", "verify the selected kernel again here", screen.action_reverify)
            yield SystemCommand("Export kernels", "the selected op's kernels to a bank file", screen.action_export)
            yield SystemCommand("Remove kernel", "remove the selected kernel", screen.action_remove)

    def _switch_to(self, screen: Screen[None], kind: type) -> None:
        while len(self.screen_stack) > 2 and not isinstance(self.screen, kind):
            self.pop_screen()
        if not isinstance(self.screen, kind):
            self.push_screen(screen)

    def action_show_sessions(self) -> None:
        while len(self.screen_stack) > 2:
            self.pop_screen()

    def action_show_bank(self) -> None:
        self._switch_to(BankScreen(), BankScreen)

    def action_show_doctor(self) -> None:
        self._switch_to(DoctorScreen(), DoctorScreen)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def open_session(self, session_id: int) -> None:
        self.push_screen(SessionScreen(session_id))

    # -- runs ----------------------------------------------------------------------------
    def action_new_session(self) -> None:
        def go(run: NewRun | None) -> None:
            if run is not None:
                self.start_run(run)

        self.push_screen(NewSessionScreen(self.launch.options), go)

    def start_run(self, new: NewRun) -> LiveRun:
        run = self.runs.new(new.ops, replace(new.options, stream_replies=True), new.model_run)  # replies stream live
        self.run_worker(lambda: self.runs.work(run), thread=True, group="runs", name=f"run {run.run_id}")
        self.notify(f"started: {run.label}")
        return run

    def resume_session(self, session_id: int, rounds: int | None = None) -> None:
        if self.runs.of_session(session_id) is not None:
            self.notify(f"session {session_id} is already running here", severity="warning")
            return
        self.start_run(NewRun([], replace(self.launch.options, resume=session_id, rounds=rounds)))

    def continue_session(self, session_id: int, rounds: int) -> None:
        self.resume_session(session_id, rounds)

    def bank_attempt(self, session_id: int, attempt_id: int) -> None:
        options = replace(self.launch.options, resume=session_id, rounds=None, bank_attempt=attempt_id)
        self.start_run(NewRun([], options))

    def on_engine_event(self, message: EngineEvent) -> None:
        e = message.event
        if isinstance(e, harness.events.SessionStarted) and not isinstance(self.screen, SessionScreen):
            self.notify(f"{e.problem}: session {e.session_id} started")
        if isinstance(e, harness.events.ModelStage) and e.stage != "instance":  # one per instance: its op's sums them
            self.notify(f"{e.problem}: {e.stage}: {e.detail}")
        if isinstance(e, harness.events.KernelAccepted):
            self.notify(f"{e.problem}: kernel {e.kernel_id} banked ({e.speedup_vs_eager or 0:.2f}x eager)")
        if isinstance(self.screen, ForgeScreen) and self.reader() is not None:
            self.screen.engine_event(e)

    def on_model_run_ended(self, message: ModelRunEnded) -> None:
        self.notify(model_line(message.result), timeout=15)
        self.push_screen(ModelRunScreen(message.result))

    def on_run_ended(self, message: RunEnded) -> None:
        if message.error:
            self.notify(f"{message.summary}: {message.error}", severity="error", timeout=15)
        else:
            self.notify(message.summary, timeout=8)

    # -- quitting ------------------------------------------------------------------------
    def action_request_quit(self) -> None:
        running = self.runs.running()
        if not running:
            self.exit()
            return

        def go(yes: bool | None) -> None:
            if yes:
                self.runs.stop_all()
                self.notify("stopping the running sessions cleanly…")
                self.set_interval(0.2, self._exit_when_stopped)

        names = ", ".join(r.label for r in running)
        self.push_screen(ConfirmDialog(f"Still running here: {names}. Stop and quit?", "Stop and quit"), go)

    def _exit_when_stopped(self) -> None:
        if not self.runs.running():
            self.exit()

    def on_unmount(self) -> None:
        self.runs.stop_all()
        if self._reader is not None:
            self._reader.close()
