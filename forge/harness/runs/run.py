"""``optimize``: the main job. For each op: a session (new or resumed) under shared limits, one
after another on this machine, or side by side on a Ray cluster (``cluster_run``).

Front ends call this and render the events; it never prints. User mistakes raise ``ForgeError``
(exit 2 for usage, 3 for an unusable LLM provider) before any session starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from forge.agents import check_provider
from forge.core.choices import Device, Strategy
from forge.core.errors import ForgeError, UsageError
from forge.core.exit_codes import ExitCode
from forge.core.problem import load_problem
from forge.core.settings import ForgeSettings
from forge.core.statuses import SessionStatus
from forge.db import (
    Driver,
    SessionHeldError,
    SessionLease,
    StoredSession,
    claim_session,
    list_sessions,
    load_session,
    open_for_writing,
)
from forge.harness import events as ev
from forge.harness.runs.cluster import run_on_cluster
from forge.harness.runs.control import RunControl
from forge.harness.runs.limits import Limits, ctrl_c_stops
from forge.harness.runs.options import OptimizeOptions
from forge.harness.sessions.leases import close_leases, give_back, hold_lease
from forge.harness.sessions.opening import RunScope, SessionWork, open_session, run_session
from forge.harness.sessions.resume import resumed_options
from forge.harness.sessions.session import SessionResult
from forge.verifier import resolve_device


@dataclass
class RunResult:
    results: list[SessionResult] = field(default_factory=list)
    interrupted: bool = False
    tokens: int = 0
    cost_usd: float | None = None
    skipped: list[ev.SessionSkipped] = field(default_factory=list)  # --resume all: sessions it left alone

    def to_json(self) -> dict[str, Any]:
        """What ``forge optimize --json`` prints (and ``--report`` writes)."""
        return {
            "problems": [r.to_json() for r in self.results],
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "skipped": [{"problem": e.problem, "session_id": e.session_id, "reason": e.reason} for e in self.skipped],
        }

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return ExitCode.INTERRUPTED
        if not self.results:  # --resume all found nothing left to continue
            return ExitCode.SUCCESS
        if any(r.status is SessionStatus.PROVIDER_ERROR for r in self.results):
            return ExitCode.PROVIDER
        if self.results and all(r.accepted for r in self.results):
            return ExitCode.SUCCESS
        if any(r.status.hit_limit for r in self.results) and not any(r.accepted for r in self.results):
            return ExitCode.LIMIT
        return ExitCode.NO_RESULT


def collect_ops(paths: list[Path]) -> list[Path]:
    """The op files named: files as given, directories expanded to their *.py files (sorted)."""
    ops: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(q for q in p.glob("*.py") if not q.name.startswith("_"))
            if not found:
                raise UsageError(f"{str(p)!r}: the directory holds no .py op files")
            ops.extend(found)
        elif p.is_file():
            ops.append(p)
        else:
            raise UsageError(f"{str(p)!r}: no such op file or directory")
    return ops


def check_op_runs(op: Path, device: Device | None) -> None:
    """``ProblemError`` unless the op file loads, builds its model and draws its inputs, and,
    where its sessions verify on the CPU, its model runs on them (a model made for CUDA may not
    run in this process: there its verifier's reference says so)."""
    load_problem(op).check_runs(forward=device is Device.CPU)


def optimize(
    op_paths: list[Path],
    options: OptimizeOptions | None = None,
    settings: ForgeSettings | None = None,
    emit: ev.Emit = ev.ignore,
    control: RunControl | None = None,
    *,
    weights: list[float] | None = None,
    limits: Limits | None = None,
) -> RunResult:
    """Optimise each op in turn, or resume the session ``options.resume`` names; ``emit`` is told
    what happens as it happens, and ``control.stop()`` (from another thread) ends the run as
    Ctrl-C does. Defaults: the built-in agents, 8 rounds, the per-user bank, and settings from the
    ``FORGE_*`` environment. Raises ForgeError for bad input. ``weights`` (one per op file named):
    the ops' parts of the time limit and budget (equal parts otherwise); ``limits``: limits
    already running (a model run's, shared by its batches of ops), instead of new ones."""
    options = options or OptimizeOptions()
    settings = settings or ForgeSettings()
    options.check()
    limits = limits or Limits(budget_usd=options.budget_usd, time_limit_s=options.time_limit_s)
    if control is not None:
        limits.stop_requested = control.stop_requested
    engine = open_for_writing(options.bank)
    try:
        run = RunResult()
        works = _works(op_paths, options, engine, run.skipped)
        if weights is not None and options.resume is None and not options.resume_all:
            works = [replace(w, weight=x) for w, x in zip(works, weights, strict=True)]
        if options.resume is None and not options.resume_all:  # every op file's mistake before any session
            device = resolve_device(settings.device) if settings.executor != "ray" else None  # a cluster's: not here
            for work in works:
                check_op_runs(work.op_path, device)
        for skipped in run.skipped:
            emit(skipped)
        for agents in {w.options.agents for w in works}:
            check_provider(agents)
        with ctrl_c_stops(limits):
            scope = RunScope(settings, limits, engine, emit, control)
            executor = run_on_cluster if settings.executor == "ray" else _run_here
            run.results, run.interrupted = executor(works, scope)
        run.tokens, run.cost_usd = limits.tokens, limits.cost_reported
        return run
    finally:
        close_leases(engine)  # sessions forge failed under, or that never opened
        engine.dispose()


def _works(
    op_paths: list[Path], options: OptimizeOptions, engine: Engine, skipped: list[ev.SessionSkipped]
) -> list[SessionWork]:
    """The run's sessions: one per op named, or the stored ones ``--resume`` names (each with its
    own stored options, this run's ``rounds`` replacing their count when given, and its lease
    taken now, so that no other driver runs it meanwhile); ``--resume all`` adds the sessions it
    leaves alone to ``skipped``."""
    if options.resume_all:
        if op_paths:
            raise UsageError("--resume all continues every session cut short in the bank: name no op files with it")
        return _cut_short_works(options, engine, skipped)
    if options.resume is None:
        ops = collect_ops(op_paths)
        if not ops:
            raise UsageError("name at least one op file (or a directory of them), or pass --resume SESSION")
        return [SessionWork(op, options) for op in ops]
    works = []
    for session_id in dict.fromkeys((options.resume, *options.resume_more)):
        # the lease first: what is checked below is then what this driver continues
        lease = hold_lease(engine, claim_session(engine, session_id, Driver.this_process()))
        works.append(_resumed_work(load_session(engine, session_id), options, lease))
    return works


def _resumed_work(stored: StoredSession, options: OptimizeOptions, lease: SessionLease) -> SessionWork:
    """A stored session to continue, with its own options (this run's flags for the rest)."""
    resumed, op_path = resumed_options(stored, replace(options, resume=stored.id, resume_more=(), resume_all=False))
    return SessionWork(op_path, resumed, stored.status, lease)


def _cut_short_works(options: OptimizeOptions, engine: Engine, skipped: list[ev.SessionSkipped]) -> list[SessionWork]:
    """``--resume all``: every kernel session cut short (oldest first) whose lease this process can
    take; the others go to ``skipped``."""
    works = []
    for summary in reversed(list_sessions(engine)):
        if not summary.status.cut_short:
            continue
        if summary.strategy == Strategy.PARALLEL:
            why = f"a parallel-plan session: resume it alone with `forge plan --resume {summary.id}`"
            skipped.append(ev.SessionSkipped(summary.op, summary.id, why))
            continue
        try:
            lease = hold_lease(engine, claim_session(engine, summary.id, Driver.this_process()))
        except SessionHeldError as exc:
            skipped.append(ev.SessionSkipped(summary.op, summary.id, f"being run by {exc.holder}"))
            continue
        try:
            stored = load_session(engine, summary.id)  # as it is now that this driver holds it
            if not stored.status.cut_short:  # its driver ended it after the list was read
                give_back(engine, lease)
                continue
            works.append(_resumed_work(stored, options, lease))
        except ForgeError as exc:  # its stored settings cannot be read, say: the others still resume
            give_back(engine, lease)
            skipped.append(ev.SessionSkipped(summary.op, summary.id, exc.message))
    return works


def _run_here(works: list[SessionWork], scope: RunScope) -> tuple[list[SessionResult], bool]:
    """The local executor: one op's session after another, on this machine."""
    results: list[SessionResult] = []
    for i, work in enumerate(works):
        session = open_session(work, scope, len(works) - i, weight_left=sum(w.weight for w in works[i:]))
        result = run_session(session, work.stored_status)
        results.append(result)
        if result.status is SessionStatus.INTERRUPTED:
            return results, True
        if result.status is SessionStatus.PROVIDER_ERROR:
            break
    return results, False
