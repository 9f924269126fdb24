"""What a screen may ask of the app that shows it, as a protocol: screens sit below the app (the
app imports them), so they name this, not the app class."""

from __future__ import annotations

from typing import Protocol

from forge import harness
from forge.core.paths import BankLocation
from forge.core.settings import ForgeSettings
from forge.tui.runs import LiveRuns


class ForgeHost(Protocol):
    settings: ForgeSettings
    bank: BankLocation
    api_bases: tuple[str, ...]
    runs: LiveRuns

    def reader(self) -> harness.BankReader | None: ...

    def open_session(self, session_id: int) -> None: ...

    def resume_session(self, session_id: int, rounds: int | None = None) -> None: ...

    def continue_session(self, session_id: int, rounds: int) -> None: ...

    def bank_attempt(self, session_id: int, attempt_id: int) -> None: ...
