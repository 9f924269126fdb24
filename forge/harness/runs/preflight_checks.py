"""The checks ``optimize`` makes before any session starts, one per field of a new-session form,
so a front end can show each problem beside the field it is about (the TUI's form) with the same
message ``forge optimize`` prints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from forge.agents import check_provider
from forge.core.choices import Device
from forge.core.errors import ForgeError
from forge.core.settings import ForgeSettings
from forge.harness.runs.options import OptimizeOptions, resolve_backend
from forge.harness.runs.run import check_op_runs, collect_ops
from forge.verifier import resolve_device


@dataclass(frozen=True)
class FieldProblem:
    field: str  # "ops", "options", "backend", "device" or "model"
    message: str


def preflight(op_paths: list[Path], options: OptimizeOptions, settings: ForgeSettings) -> list[FieldProblem]:
    """What would stop ``optimize(op_paths, options, settings)`` before it starts (empty: nothing).
    The provider check reaches the LLM provider (seconds): run it off a UI thread."""
    problems: list[FieldProblem] = []

    def check(name: str, fn: object) -> None:
        try:
            fn()  # type: ignore[operator]
        except ForgeError as exc:
            problems.append(FieldProblem(name, exc.message))

    device: list[Device] = []

    def ops() -> None:
        found = collect_ops(op_paths)
        if not found:
            raise ForgeError("name an op file (or a directory of them)")
        for op in found:
            check_op_runs(op, device[0] if device else None)

    check("device", lambda: device.append(resolve_device(settings.device)))
    check("ops", ops)
    check("options", options.check)
    if device:
        check("backend", lambda: resolve_backend(options.backend, device[0]))
    check("model", lambda: check_provider(options.agents))
    return problems
