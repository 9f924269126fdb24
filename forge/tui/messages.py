"""What the engine's thread workers tell the UI thread, as Textual messages."""

from __future__ import annotations

from textual.message import Message

from forge import harness
from forge.harness import events


class EngineEvent(Message):
    """One of the engine's events, from the run ``run_id`` started in this TUI."""

    def __init__(self, run_id: int, event: events.Event) -> None:
        super().__init__()
        self.run_id, self.event = run_id, event


class RunEnded(Message):
    """A run started in this TUI ended: ``error`` says why when forge itself failed."""

    def __init__(self, run_id: int, summary: str, error: str | None = None) -> None:
        super().__init__()
        self.run_id, self.summary, self.error = run_id, summary, error


class ModelRunEnded(Message):
    """A model-level run started in this TUI ended with its result (shown on a screen of its own)."""

    def __init__(self, run_id: int, result: harness.ModelRunResult) -> None:
        super().__init__()
        self.run_id, self.result = run_id, result
