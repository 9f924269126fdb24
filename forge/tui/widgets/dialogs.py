"""Small modal questions: yes/no, a number, a line of text. Each dismisses with its answer
(None when cancelled with Escape)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label


class ConfirmDialog(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(False)", "Cancel"),
        Binding("y", "dismiss(True)", "Yes"),
    ]

    def __init__(self, question: str, yes: str = "Yes") -> None:
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="question")
            with Horizontal(classes="buttons"):
                yield Button(self.yes, variant="error", id="yes")
                yield Button("No", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class AskText(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, question: str, value: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.question, self.value, self.placeholder = question, value, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="question")
            yield Input(self.value, placeholder=self.placeholder, id="answer")
            yield Label("", id="problem", classes="problem")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        problem = self.problem(text)
        if problem:
            self.query_one("#problem", Label).update(problem)
        else:
            self.dismiss(text)

    def problem(self, text: str) -> str | None:
        """Why ``text`` is not an answer (None: it is)."""
        return "type an answer, or Escape to cancel" if not text else None


class AskNumber(AskText):
    def __init__(self, question: str, value: int, low: int = 1, high: int = 1000) -> None:
        super().__init__(question, str(value))
        self.low, self.high = low, high

    def problem(self, text: str) -> str | None:
        if not text.isdigit() or not self.low <= int(text) <= self.high:
            return f"a whole number from {self.low} to {self.high}"
        return None
