"""The engine: every operation a front end needs, as a function, and the events it reports.

- ``optimize``: sessions that search for a faster kernel per op and bank the one that holds up
  (``OptimizeOptions`` in, ``RunResult`` out, ``events`` while it runs, ``RunControl`` to stop it
  from another thread);
- ``optimize_model``: a model-level run (``ModelChoices`` in, ``ModelRunResult`` out): the model
  profiled, its hot classes carved out as ops and optimized, the kernelized model proven end to end;
- ``optimize_plan``: a parallel-plan session for a model on a world size (``PlanOptions`` in,
  ``PlanResult`` out): plans up the ladder (static rules, cost model, real runs), the fastest banked;
- ``verify_candidate``: one candidate checked and timed (and saved to the bank when asked);
- the bank: ``bank_list``, ``bank_show``, ``bank_export``, ``bank_import``, ``bank_reverify``,
  ``bank_remove``; the sessions in it: ``session_list``, ``session_show``;
- ``BankReader``: a long-lived read-only view of a bank, for a front end that polls it (``bank_exists``
  says whether there is one yet);
- ``doctor``: what this machine gives forge;
- ``preflight``: optimize's checks before it starts, one per field (a new-session form);
- ``write_report``: an optimize run's JSON and chart (``write_model_report``: a model-level run's).

Inside, one package a concept: ``sessions`` (a kernel session: opened or resumed, driven by a
search strategy over explicit steps, finalists confirmed and banked, all recorded under a lease),
``plans`` (a parallel-plan session), ``runs`` (a run's options, limits and preflight; its sessions
one after another here, or side by side on a Ray cluster: ``runs.cluster``, ``--executor ray``),
``bank`` (the bank's operations and a polling reader) and ``health`` (what ``doctor`` checks); ``events`` and ``verify``
(one candidate) beside them.

Each name loads its module on first use: a front end imports this package at start-up, and a
``forge verify`` should not wait for the bank's database layer or the agents to load.
"""

from typing import TYPE_CHECKING

from forge.core.importing import attributes_on_first_use

if TYPE_CHECKING:
    from forge.db import (
        BucketConfig,
        KernelDetail,
        KernelSummary,
        PlanDetail,
        PlanSummary,
        SessionSummary,
        StoredAttempt,
        StoredSession,
    )
    from forge.harness import events
    from forge.harness.bank.commands import (
        Reverified,
        bank_export,
        bank_export_plan,
        bank_import,
        bank_list,
        bank_plans,
        bank_remove,
        bank_remove_plan,
        bank_reverify,
        bank_show,
        bank_show_plan,
    )
    from forge.harness.bank.reader import BankReader, bank_exists
    from forge.harness.bank.stored_sessions import session_list, session_rounds, session_show
    from forge.harness.health.findings import DoctorReport, Finding
    from forge.harness.health.machine_checks import doctor
    from forge.harness.model_run.report import write_model_report
    from forge.harness.model_run.run import ModelChoices, ModelRunResult, optimize_model
    from forge.harness.model_run.searches import amdahl
    from forge.harness.plans.options import DEFAULT_PLAN_ROUNDS, PlanOptions
    from forge.harness.plans.run import PlanResult, optimize_plan
    from forge.harness.runs.control import RunControl
    from forge.harness.runs.options import DEFAULT_ROUNDS, OptimizeOptions
    from forge.harness.runs.preflight_checks import FieldProblem, preflight
    from forge.harness.runs.report import write_report
    from forge.harness.runs.run import RunResult, collect_ops, optimize
    from forge.harness.sessions.search_state import TracePoint
    from forge.harness.sessions.session import SessionResult
    from forge.harness.verify import Verification, verify_candidate

__all__ = [
    "DEFAULT_PLAN_ROUNDS",
    "DEFAULT_ROUNDS",
    "BankReader",
    "BucketConfig",
    "DoctorReport",
    "FieldProblem",
    "Finding",
    "KernelDetail",
    "KernelSummary",
    "ModelChoices",
    "ModelRunResult",
    "OptimizeOptions",
    "PlanDetail",
    "PlanOptions",
    "PlanResult",
    "PlanSummary",
    "Reverified",
    "RunControl",
    "RunResult",
    "SessionResult",
    "SessionSummary",
    "StoredAttempt",
    "StoredSession",
    "TracePoint",
    "Verification",
    "amdahl",
    "bank_exists",
    "bank_export",
    "bank_export_plan",
    "bank_import",
    "bank_list",
    "bank_plans",
    "bank_remove",
    "bank_remove_plan",
    "bank_reverify",
    "bank_show",
    "bank_show_plan",
    "collect_ops",
    "doctor",
    "events",
    "optimize",
    "optimize_model",
    "optimize_plan",
    "preflight",
    "session_list",
    "session_rounds",
    "session_show",
    "verify_candidate",
    "write_model_report",
    "write_report",
]

# The module each name comes from (the same imports as above, made on first use).
_SOURCES = {
    "forge.db": (
        "BucketConfig",
        "KernelDetail",
        "KernelSummary",
        "PlanDetail",
        "PlanSummary",
        "SessionSummary",
        "StoredAttempt",
        "StoredSession",
    ),
    "forge.harness.bank.commands": (
        "Reverified",
        "bank_export",
        "bank_export_plan",
        "bank_import",
        "bank_list",
        "bank_plans",
        "bank_remove",
        "bank_remove_plan",
        "bank_reverify",
        "bank_show",
        "bank_show_plan",
    ),
    "forge.harness.bank.reader": ("BankReader", "bank_exists"),
    "forge.harness.runs.control": ("RunControl",),
    "forge.harness.health.findings": ("DoctorReport", "Finding"),
    "forge.harness.health.machine_checks": ("doctor",),
    "forge.harness.model_run.run": ("ModelChoices", "ModelRunResult", "optimize_model"),
    "forge.harness.model_run.searches": ("amdahl",),
    "forge.harness.model_run.report": ("write_model_report",),
    "forge.harness.events": ("events",),
    "forge.harness.runs.options": ("DEFAULT_ROUNDS", "OptimizeOptions"),
    "forge.harness.plans.options": ("DEFAULT_PLAN_ROUNDS", "PlanOptions"),
    "forge.harness.plans.run": ("PlanResult", "optimize_plan"),
    "forge.harness.runs.preflight_checks": ("FieldProblem", "preflight"),
    "forge.harness.runs.report": ("write_report",),
    "forge.harness.runs.run": ("RunResult", "collect_ops", "optimize"),
    "forge.harness.sessions.search_state": ("TracePoint",),
    "forge.harness.sessions.session": ("SessionResult",),
    "forge.harness.bank.stored_sessions": ("session_list", "session_rounds", "session_show"),
    "forge.harness.verify": ("Verification", "verify_candidate"),
}
_WHERE = {name: module for module, names in _SOURCES.items() for name in names}
__getattr__ = attributes_on_first_use(__name__, _WHERE)
