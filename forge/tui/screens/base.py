"""What every full screen of the TUI shares: the app seen as a ``ForgeHost``, and a poll of the
bank (what another process writes shows up within ``POLL_S``)."""

from __future__ import annotations

from typing import ClassVar, cast

from textual.screen import Screen

from forge.harness import events
from forge.tui.host import ForgeHost


class ForgeScreen(Screen[None]):
    POLL_S: ClassVar[float | None] = None  # None: the screen does not poll

    @property
    def forge(self) -> ForgeHost:
        return cast(ForgeHost, self.app)

    def refresh_data(self) -> None:
        """Read the bank again and update in place (screens that show bank data override it)."""

    def engine_event(self, event: events.Event) -> None:
        """An event from a run started here: read the bank again at once (a streamed reply's
        progress is left to the screen that shows it). A screen just pushed has no widgets until
        it mounts, and its mount reads the bank anyway: events before then are dropped."""
        if self.is_mounted and not isinstance(event, events.ReplyProgress):
            self.refresh_data()

    def start_polling(self) -> None:
        self.refresh_data()
        if self.POLL_S is not None:
            self.set_interval(self.POLL_S, self.refresh_data)
