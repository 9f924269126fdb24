"""``optimize``: the main job. For each op: a session (new or resumed) under shared limits.

Front ends call this and render the events; it never prints. User mistakes raise ``ForgeError``
(exit 2 for usage, 3 for an unusable LLM provider) before any session starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from forge.agents import AgentKind, MachineFacts, check_provider, make_agents
from forge.core.errors import ProviderError, UsageError
from forge.core.problem import load_problem, reference_hash
from forge.core.settings import ForgeSettings
from forge.core.statuses import SessionStatus
from forge.db import load_session, open_for_writing
from forge.harness import events as ev
from forge.harness.control import RunControl
from forge.harness.limits import Limits, ctrl_c_stops
from forge.harness.options import OptimizeOptions, StoredOptions, resolve_backend
from forge.harness.recorder import SessionRecorder
from forge.harness.resume import restore_state, resumed_options
from forge.harness.search import STRATEGIES
from forge.harness.session import INTERRUPTED_REASON, SearchState, Session, SessionPlan, SessionResult
from forge.harness.steps import SessionEvents, SessionIO
from forge.verifier import VerifierService, machine, resolve_device


@dataclass
class RunResult:
    results: list[SessionResult] = field(default_factory=list)
    interrupted: bool = False
    tokens: int = 0
    cost_usd: float | None = None

    def to_json(self) -> dict[str, Any]:
        """What ``forge optimize --json`` prints (and ``--report`` writes)."""
        return {"problems": [r.to_json() for r in self.results], "tokens": self.tokens, "cost_usd": self.cost_usd}

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        if any(r.status is SessionStatus.PROVIDER_ERROR for r in self.results):
            return 3
        if self.results and all(r.accepted for r in self.results):
            return 0
        if any(r.status.hit_limit for r in self.results) and not any(r.accepted for r in self.results):
            return 4
        return 1


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


def machine_facts(device: str, settings: ForgeSettings) -> MachineFacts:
    """What the coder's prompt says about the machine (measured figures are cached)."""
    threads = settings.threads or machine.available_cores()
    figures = machine.measured_figures(device, threads, settings.cache_path())
    measured = MachineFacts(
        device, device_name=figures.device_name, bandwidth_gbs=figures.bandwidth_gbs, peak_gflops=figures.peak_gflops
    )
    if device == "cpu":
        isa = [f for f in machine.cpu_flags() if f.startswith(("avx", "fma", "sse4", "amx", "f16c", "bmi"))]
        return replace(
            measured, cpu_model=machine.cpu_model(), cores=machine.available_cores(), isa=isa,
            caches=machine.cache_sizes(),
        )  # fmt: skip
    import torch

    props = torch.cuda.get_device_properties(0)
    return replace(
        measured, gpu=props.name, sms=props.multi_processor_count, memory_gb=round(props.total_memory / 2**30, 1),
        capability=f"{props.major}.{props.minor}",
    )  # fmt: skip


def open_session(
    op_path: Path,
    options: OptimizeOptions,
    settings: ForgeSettings,
    limits: Limits,
    engine: Engine,
    emit: ev.Emit,
    control: RunControl | None = None,
    ops_left: int = 1,
) -> Session:
    """A new session for ``op_path``, or the stored one ``options.resume`` names, ready to run,
    with its share of the run's limits (what is left, over the ``ops_left`` ops not yet done)."""
    device = resolve_device(settings.device)
    backend = resolve_backend(options.backend, device)
    problem = load_problem(op_path)
    facts = machine_facts(device, settings) if options.model else MachineFacts(device)
    agents = make_agents(op_path, options.agents, backend)
    plan = SessionPlan(
        op_path, problem.spec, reference_hash(problem), problem.target_class_path, device, backend, options, facts
    )
    state: SearchState | None = None
    if options.resume is None:
        recorder = SessionRecorder.start(
            engine, plan.spec, plan.op_hash, plan.target, strategy=options.strategy, agent=str(agents.kind),
            model=options.model if agents.kind is AgentKind.LLM else None,
            settings=StoredOptions.of(options, op_path, device, backend).to_json(),
        )  # fmt: skip
        io = SessionIO(recorder, SessionEvents(emit, plan.spec.name, recorder.session_id), limits)
    else:
        state, spend = restore_state(load_session(engine, options.resume))
        recorder = SessionRecorder.reopen(engine, options.resume, options.round_limit)
        io = SessionIO(recorder, SessionEvents(emit, plan.spec.name, recorder.session_id), limits, spend)
    io.share = limits.share(ops_left)  # taken last: the time spent opening the session is not its own
    verifier = VerifierService(op_path, settings, device, options.workers, limits.stop_requested)
    if control is not None:
        control.attach(verifier)
    return Session(plan, agents, io, verifier, settings, state)


def run_session(session: Session, stored_status: SessionStatus | None = None) -> SessionResult:
    """The search, then the session's end (confirm, bank), whatever stopped the search; or, with
    ``bank_attempt``, only that attempt's confirmation (the session keeps ``stored_status``)."""
    session.start()
    if session.options.bank_attempt is not None:
        return session.bank_by_hand(session.options.bank_attempt, stored_status or SessionStatus.FINISHED)
    try:
        session.verify_pending()
        status, reason = STRATEGIES[session.options.strategy](session)
    except ProviderError as exc:  # the provider went away mid-session: stop cleanly, resumable
        return session.finish(SessionStatus.PROVIDER_ERROR, exc.message)
    except KeyboardInterrupt:
        session.verifier.end_workers()
        return session.finish(SessionStatus.INTERRUPTED, INTERRUPTED_REASON)
    return session.finish(status, reason)


def optimize(
    op_paths: list[Path],
    options: OptimizeOptions | None = None,
    settings: ForgeSettings | None = None,
    emit: ev.Emit = ev.ignore,
    control: RunControl | None = None,
) -> RunResult:
    """Optimise each op in turn, or resume the session ``options.resume`` names; ``emit`` is told
    what happens as it happens, and ``control.stop()`` (from another thread) ends the run as
    Ctrl-C does. Defaults: the built-in agents, 8 rounds, the per-user bank, and settings from the
    ``FORGE_*`` environment. Raises ForgeError for bad input."""
    options = options or OptimizeOptions()
    settings = settings or ForgeSettings()
    options.check()
    limits = Limits(budget_usd=options.budget_usd, time_limit_s=options.time_limit_s)
    if control is not None:
        limits.stop_requested = control.stop_requested
    engine = open_for_writing(options.bank)
    try:
        stored_status = None
        if options.resume is not None:
            stored = load_session(engine, options.resume)
            options, op_path = resumed_options(stored, options)
            op_paths, stored_status = [op_path], stored.status
        ops = collect_ops(op_paths)
        if not ops:
            raise UsageError("name at least one op file (or a directory of them), or pass --resume SESSION")
        check_provider(options.agents)
        run = RunResult()
        with ctrl_c_stops(limits):
            for i, op in enumerate(ops):
                session = open_session(op, options, settings, limits, engine, emit, control, len(ops) - i)
                result = run_session(session, stored_status)
                run.results.append(result)
                if result.status is SessionStatus.INTERRUPTED:
                    run.interrupted = True
                    break
                if result.status is SessionStatus.PROVIDER_ERROR:
                    break
        run.tokens, run.cost_usd = limits.tokens, limits.cost_reported
        return run
    finally:
        engine.dispose()
