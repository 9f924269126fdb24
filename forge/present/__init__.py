"""How forge shows things, shared by its two front ends: numbers, statuses, table rows and a
verdict, built once as rich renderables that the CLI prints and the TUI's widgets display.

- ``formats``: speedups, times, seconds, cost, dates, and the colour of each status;
- ``rows``: the columns and cells of the sessions, attempts, kernels and doctor tables;
- ``kernel_view``: a bank entry in full (configs, binding, regimes, checks);
- ``model_rows``: a model-level run's classes, its four-way timing and a one-line summary;
- ``verdict_view``: a verdict (checks, first failure, timings with spread, roofline) and the diff
  of an attempt against its parent.
"""

from forge.present.formats import fmt_cost, fmt_ms, fmt_seconds, fmt_step, fmt_times, fmt_when, status_text
from forge.present.kernel_view import binds_text, evidence_line, kernel_details
from forge.present.model_rows import (
    CLASS_COLUMNS,
    FOUR_WAY_COLUMNS,
    OP_COLUMNS,
    class_cells,
    four_way_cells,
    model_line,
    op_cells,
    ratio_text,
)
from forge.present.rows import (
    ATTEMPT_COLUMNS,
    FINDING_COLUMNS,
    KERNEL_COLUMNS,
    SESSION_COLUMNS,
    attempt_cells,
    best_so_far,
    finding_cells,
    kernel_cells,
    session_cells,
)
from forge.present.verdict_view import plan_evidence_renderable, source_diff, verdict_renderable

__all__ = [
    "ATTEMPT_COLUMNS",
    "CLASS_COLUMNS",
    "FINDING_COLUMNS",
    "FOUR_WAY_COLUMNS",
    "KERNEL_COLUMNS",
    "OP_COLUMNS",
    "SESSION_COLUMNS",
    "attempt_cells",
    "best_so_far",
    "binds_text",
    "class_cells",
    "evidence_line",
    "finding_cells",
    "fmt_cost",
    "fmt_ms",
    "fmt_seconds",
    "fmt_step",
    "fmt_times",
    "fmt_when",
    "four_way_cells",
    "kernel_cells",
    "kernel_details",
    "model_line",
    "op_cells",
    "plan_evidence_renderable",
    "ratio_text",
    "session_cells",
    "source_diff",
    "status_text",
    "verdict_renderable",
]
