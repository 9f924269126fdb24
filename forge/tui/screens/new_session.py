"""The new-session form: op file (with path completion), agent/model, judge, backend, strategy,
rounds, budget, time limit. Each problem is shown under its field, with the message
``forge optimize`` would print (the engine's own preflight checks); it never starts a run that
``forge optimize`` would refuse."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, cast

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Button, Checkbox, Input, Label, Select

from forge import harness
from forge.core.choices import SEARCH_STRATEGIES, Backend, Strategy
from forge.tui.host import ForgeHost


class PathSuggester(Suggester):
    """Completes the last part of a path from what is on disk (directories end in "/")."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            return None
        path = Path(value).expanduser()
        folder, stem = (path, "") if value.endswith("/") else (path.parent, path.name)
        try:
            names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir() if p.name.startswith(stem))
        except OSError:
            return None
        names = [n for n in names if not n.startswith((".", "__"))] or names
        return value + names[0][len(stem) :] if names else None


@dataclass(frozen=True)
class NewRun:
    ops: list[Path]
    options: harness.OptimizeOptions
    model_run: harness.ModelChoices | None = None  # a model-level run (``--modules``) of ops[0]


_FIELDS = ("ops", "model", "judge", "api_base", "backend", "strategy", "rounds", "budget", "time_limit")


class NewSessionScreen(ModalScreen[NewRun | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, defaults: harness.OptimizeOptions, op: str = "") -> None:
        super().__init__()
        self.defaults, self.op = defaults, op

    @property
    def forge(self) -> ForgeHost:
        return cast(ForgeHost, self.app)

    def compose(self) -> ComposeResult:
        d = self.defaults
        with VerticalScroll(classes="dialog form"):
            yield Label("New session", classes="title")
            yield from self._field(
                "ops",
                "op file (or directory)",
                Input(self.op, placeholder="examples/ops/rmsnorm.py", suggester=PathSuggester(), compact=True),
            )
            modules = "a model: optimize its hot classes, prove the model (--modules)"
            yield Checkbox(modules, id="f-modules", compact=True)
            training = "kernels for training: write and verify the backward too (--train)"
            yield Checkbox(training, value=d.train, id="f-train", compact=True)
            yield from self._field(
                "model",
                "coder model (empty: the built-in agent)",
                Input(d.model or "", placeholder="openai/gpt-4o, ollama_chat/qwen2.5-coder", compact=True),
            )
            yield from self._field(
                "judge", "judge model (empty: as the coder)", Input(d.judge_model or "", compact=True)
            )
            yield from self._field(
                "api_base", "api base (a local OpenAI-compatible server)", Input(d.api_base or "", compact=True)
            )
            yield from self._field(
                "backend",
                "backend",
                Select(
                    [(str(b), str(b)) for b in Backend],
                    value=d.backend,
                    allow_blank=False,
                    compact=True,
                ),
            )
            yield from self._field(
                "strategy",
                "strategy",
                Select(
                    [(str(s), str(s)) for s in SEARCH_STRATEGIES], value=d.strategy, allow_blank=False, compact=True
                ),
            )
            yield from self._field("rounds", "rounds", Input(str(d.round_limit), compact=True))
            yield from self._field("budget", "budget, USD (empty: none)", Input(_blank(d.budget_usd), compact=True))
            yield from self._field(
                "time_limit", "time limit, seconds (empty: none)", Input(_blank(d.time_limit_s), compact=True)
            )
            with Horizontal(classes="buttons"):
                yield Button("Start", variant="primary", id="start")
                yield Button("Cancel", id="cancel")

    def _field(self, name: str, label: str, widget: Input | Select[str]) -> ComposeResult:
        widget.id = f"f-{name}"
        yield Label(label, classes="field-label")
        yield widget
        yield Label("", id=f"e-{name}", classes="problem")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self.submit()

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self.submit()

    def _text(self, name: str) -> str:
        return self.query_one(f"#f-{name}", Input).value.strip()

    def _number(self, name: str, kind: type[int] | type[float]) -> int | float | None:
        text = self._text(name)
        if not text:
            return None
        try:
            return kind(text)
        except ValueError:
            self._problem(name, f"{text!r} is not a {'whole ' if kind is int else ''}number")
            raise

    def _problem(self, name: str, message: str) -> None:
        label = self.query_one(f"#e-{name}", Label)
        label.update(message)
        label.display = bool(message)  # an empty line per field would not fit 80x24

    def on_mount(self) -> None:
        for name in _FIELDS:
            self._problem(name, "")
        self.query_one("#f-ops", Input).focus()

    def submit(self) -> None:
        for name in _FIELDS:
            self._problem(name, "")
        try:
            rounds = self._number("rounds", int)
            budget, limit = self._number("budget", float), self._number("time_limit", float)
        except ValueError:
            return
        options = harness.OptimizeOptions(
            model=self._text("model") or None,
            judge_model=self._text("judge") or None,
            api_base=self._text("api_base") or None,
            backend=Backend(str(self.query_one("#f-backend", Select).value)),
            strategy=Strategy(str(self.query_one("#f-strategy", Select).value)),
            rounds=int(rounds) if rounds else None,
            budget_usd=budget,
            time_limit_s=limit,
            workers=self.defaults.workers,
            bank=self.defaults.bank,
            train=self.query_one("#f-train", Checkbox).value,
        )
        ops = [Path(self._text("ops")).expanduser()] if self._text("ops") else []
        model_run = harness.ModelChoices() if self.query_one("#f-modules", Checkbox).value else None
        self.query_one("#start", Button).disabled = True
        self.notify("checking…" if not options.model else f"checking that {options.model} answers…")
        self._check(NewRun(ops, options, model_run))

    @work(thread=True, exclusive=True, group="preflight")
    def _check(self, run: NewRun) -> None:
        # a model (its profile step checks the file) or op files; the other fields either way
        problems = harness.preflight([] if run.model_run else run.ops, run.options, self.forge.settings)
        if run.model_run is not None:
            problems = [p for p in problems if p.field != "ops"]
        if run.model_run is not None and len(run.ops) != 1:
            problems.append(harness.FieldProblem("ops", "a model-level run takes one model file (or module:factory)"))
        self.app.call_from_thread(self._checked, run, problems)

    def _checked(self, run: NewRun, problems: list[harness.FieldProblem]) -> None:
        self.query_one("#start", Button).disabled = False
        if not problems:
            self.dismiss(run)
            return
        where = {"ops": "ops", "model": "model", "backend": "backend", "device": "backend", "options": "rounds"}
        for p in problems:
            self._problem(where.get(p.field, "ops"), p.message)


def _blank(value: float | None) -> str:
    return "" if value is None else f"{value:g}"
