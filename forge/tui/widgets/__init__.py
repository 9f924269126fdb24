"""The TUI's own widgets: the dialogs its screens ask questions with, and a table that updates
rows in place."""

from forge.tui.widgets.dialogs import AskNumber, AskText, ConfirmDialog
from forge.tui.widgets.live_table import LiveTable

__all__ = ["AskNumber", "AskText", "ConfirmDialog", "LiveTable"]
