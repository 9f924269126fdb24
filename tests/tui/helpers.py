"""Driving the real app with Pilot: wait for what a user would wait for."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from forge.harness import OptimizeOptions
from forge.tui import ForgeApp, TuiLaunch


async def wait_for(pilot: Pilot[None], ok: Callable[[], bool], timeout_s: float = 240, what: str = "") -> None:
    """Let the app run until ``ok()`` (the engine's threads keep going meanwhile)."""
    end = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or ok}")
        await pilot.pause(0.25)


def text_of(widget: Static) -> str:
    """What a Static shows, as plain text (its content printed without styles)."""
    console = Console(width=200, record=True, color_system=None, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def make_app(bank: Path, settings, ops: list[Path] | None = None, **options) -> ForgeApp:  # type: ignore[no-untyped-def]
    return ForgeApp(TuiLaunch(ops or [], OptimizeOptions(bank=bank, **options), settings))


def record_notifications(app: ForgeApp) -> list[str]:
    """Every message the app shows as a notification, in order (it still shows them)."""
    told: list[str] = []
    notify = app.notify

    def record(message, **kwargs):  # type: ignore[no-untyped-def]
        told.append(str(message))
        return notify(message, **kwargs)

    app.notify = record  # type: ignore[method-assign]
    return told
