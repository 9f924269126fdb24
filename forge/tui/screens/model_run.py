"""A model-level run's result: its summary line, each class with why it was or was not optimized,
its ops (the instances each stands for, what each cost and bought), and the model timed four
ways (eager, kernelized, torch.compile, both) with 95% intervals."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

from forge import harness
from forge.present import (
    CLASS_COLUMNS,
    FOUR_WAY_COLUMNS,
    OP_COLUMNS,
    class_cells,
    four_way_cells,
    model_line,
    op_cells,
)


class ModelRunScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(self, result: harness.ModelRunResult) -> None:
        super().__init__()
        self.result = result

    def compose(self) -> ComposeResult:
        proof = self.result.proof
        with VerticalScroll(classes="dialog"):
            yield Label("Model-level run", classes="title")
            yield Static(model_line(self.result), id="model-line", markup=False)
            classes: DataTable[str] = DataTable(id="model-classes", cursor_type="row")
            classes.add_columns(*CLASS_COLUMNS)
            classes.add_rows(class_cells(self.result))
            yield classes
            ops: DataTable[str] = DataTable(id="model-ops", cursor_type="row")
            ops.add_columns(*OP_COLUMNS)
            ops.add_rows([op_cells(o) for o in self.result.ops])
            yield ops
            timings: DataTable[str] = DataTable(id="model-timings", cursor_type="row")
            timings.add_columns(*FOUR_WAY_COLUMNS)
            timings.add_rows([four_way_cells(t) for t in proof.timings] if proof is not None else [])
            yield timings
            said = [*self.result.compile_demoted, *self.result.training_demoted, *(proof.warnings if proof else [])]
            said += [proof.compile_error] if proof is not None and proof.compile_error else []
            yield Static("\n".join(said), id="model-notes", markup=False)
