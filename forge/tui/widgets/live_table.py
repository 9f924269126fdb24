"""A DataTable whose rows are kept by key and updated in place: a poll that finds the same rows
changes only the cells that differ (new rows at the end are appended), so the cursor and the
scroll position stay where they are."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

Cell = str | Text


class LiveTable(DataTable[Cell]):
    def __init__(self, columns: Sequence[str], *, id: str | None = None) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, id=id)
        self._columns = tuple(columns)
        self._shown: dict[str, tuple[Cell, ...]] = {}

    def on_mount(self) -> None:
        for name in self._columns:
            self.add_column(name, key=name)

    def show(self, rows: Sequence[tuple[str, tuple[Cell, ...]]]) -> None:
        """Make the table hold exactly ``rows`` (key, cells), in their order."""
        keys, shown = [k for k, _ in rows], list(self._shown)
        if keys[: len(shown)] != shown:  # rows went away or moved: rebuild, keeping the selection
            selected = self.selected_key
            self.clear()
            self._shown = {}
            for key, cells in rows:
                self.add_row(*cells, key=key)
                self._shown[key] = cells
            if selected in self._shown:
                self.move_cursor(row=keys.index(selected))
            return
        for key, cells in rows:
            old = self._shown.get(key)
            if old is None:
                self.add_row(*cells, key=key)
            elif old != cells:
                for name, before, after in zip(self._columns, old, cells, strict=True):
                    if before != after:
                        self.update_cell(key, name, after)
            self._shown[key] = cells

    @property
    def selected_key(self) -> str | None:
        """The key of the row under the cursor (None when the table is empty)."""
        if not self.row_count:
            return None
        return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
