"""The runs this TUI started: each an ``optimize`` call in a Textual thread worker, with the
``RunControl`` that stops it cleanly. The UI thread only starts, stops and looks them up; the
engine's events come back as messages."""

from __future__ import annotations

import itertools
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from textual.message import Message

from forge import harness
from forge.core.errors import ForgeError
from forge.core.settings import ForgeSettings
from forge.harness import events
from forge.tui.messages import EngineEvent, ModelRunEnded, RunEnded

Post = Callable[[Message], bool]  # App.post_message: safe to call from any thread


@dataclass
class LiveRun:
    run_id: int
    ops: list[Path]
    options: harness.OptimizeOptions
    control: harness.RunControl = field(default_factory=lambda: harness.RunControl())
    sessions: set[int] = field(default_factory=set)
    model_run: harness.ModelChoices | None = None  # a model-level run of ops[0]
    running: bool = True
    started: float = field(default_factory=time.monotonic)

    def limits_left(self, cost_usd: float | None) -> str:
        """What is left of the run's limits ("" when it has none): seconds, and dollars given
        what its sessions spent (``cost_usd``)."""
        left = []
        if self.options.time_limit_s is not None:
            left.append(f"{max(0.0, self.options.time_limit_s - (time.monotonic() - self.started)):.0f} s")
        if self.options.budget_usd is not None:
            left.append(f"${max(0.0, self.options.budget_usd - (cost_usd or 0.0)):.4f}")
        return " and ".join(left)

    @property
    def label(self) -> str:
        if self.options.resume is not None:
            return f"session {self.options.resume}"
        return ", ".join(p.stem for p in self.ops)


class LiveRuns:
    """Start, track and stop this TUI's runs; ``work`` runs one in the calling (worker) thread."""

    def __init__(self, settings: ForgeSettings, post: Post) -> None:
        self.settings, self._post = settings, post
        self._ids = itertools.count(1)
        self.runs: dict[int, LiveRun] = {}

    def new(
        self, ops: list[Path], options: harness.OptimizeOptions, model_run: harness.ModelChoices | None = None
    ) -> LiveRun:
        run = LiveRun(next(self._ids), ops, options, model_run=model_run)
        self.runs[run.run_id] = run
        return run

    def work(self, run: LiveRun) -> None:
        """The run itself (in a thread worker): events are posted as they come; the end, or what
        failed, is posted last. A crash (the engine marks its sessions ``crashed``) never leaves the UI dead."""

        def emit(e: events.Event) -> None:
            if isinstance(e, events.SessionStarted):
                run.sessions.add(e.session_id)
            self._post(EngineEvent(run.run_id, e))

        try:
            if run.model_run is not None:
                model = harness.optimize_model(
                    str(run.ops[0]), run.options, self.settings, run.model_run, emit, run.control
                )
                self._post(ModelRunEnded(run.run_id, model))
                return
            result = harness.optimize(run.ops, run.options, self.settings, emit, run.control)
        except ForgeError as exc:  # bad input before it started, or a bank/op problem during it
            self._post(RunEnded(run.run_id, run.label, exc.message))
        except BaseException as exc:  # a bug in forge: say so, keep the UI alive
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self._post(RunEnded(run.run_id, f"{run.label}: forge failed", detail))
        else:
            told = "; ".join(_one_line(r) for r in result.results) or "nothing ran"
            self._post(RunEnded(run.run_id, told))
        finally:
            run.running = False

    def running(self) -> list[LiveRun]:
        return [r for r in self.runs.values() if r.running]

    def of_session(self, session_id: int) -> LiveRun | None:
        return next((r for r in self.running() if session_id in r.sessions), None)

    def stop_all(self) -> None:
        for run in self.running():
            run.control.stop()


def _one_line(r: harness.SessionResult) -> str:
    if r.accepted:
        return f"{r.problem}: kernel {r.kernel_id} banked ({r.speedup_vs_eager or 0:.2f}x eager)"
    return f"{r.problem}: {r.status}, nothing banked"
