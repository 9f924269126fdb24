"""Opening a session: a new one for an op, or a stored one resumed, with its agents, its share of
the run's limits and its verifier (this machine's, or the one a cluster placed for it); and
running it to its end."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy import Engine

from forge.agents import AgentKind, MachineFacts, make_agents
from forge.core.choices import Device
from forge.core.errors import ProviderError
from forge.core.problem import load_problem, reference_hash
from forge.core.settings import ForgeSettings
from forge.core.statuses import SessionStatus
from forge.db import SessionLease, SessionTakenOverError, load_session
from forge.harness import events as ev
from forge.harness.runs.control import RunControl
from forge.harness.runs.limits import Limits
from forge.harness.runs.options import OptimizeOptions, StoredOptions, resolve_backend, session_settings
from forge.harness.sessions.leases import KEEPER
from forge.harness.sessions.recorder import SessionRecorder
from forge.harness.sessions.resume import restore_state
from forge.harness.sessions.search import STRATEGIES
from forge.harness.sessions.search_state import SearchState
from forge.harness.sessions.session import INTERRUPTED_REASON, Session, SessionPlan, SessionResult
from forge.harness.sessions.steps import MachineStayedBusy, SessionEvents, SessionIO
from forge.verifier import Verifier, VerifierService, measure_op_brief, resolve_device
from forge.verifier.machine import facts as machine
from forge.verifier.machine.figures import FiguresEntry


def checked_figures(device: Device, settings: ForgeSettings) -> FiguresEntry:
    """This machine's measured figures for a session starting here: the cached ones checked
    against a quick probe, measured again where that says so (``machine.checked_figures``)."""
    threads = settings.threads or machine.available_cores()
    wait_s = machine.figures_wait_s(settings.load_check)
    return machine.checked_figures(device, threads, settings.cache_path(), wait_s=wait_s).entry


def machine_facts(device: Device, checked: FiguresEntry) -> MachineFacts:
    """What the coder's prompt says about the machine (figures measured under load say so)."""
    figures = checked.figures
    measured = MachineFacts(
        device,
        device_name=figures.device_name,
        bandwidth_gbs=figures.bandwidth_gbs,
        peak_gflops=figures.peak_gflops,
        figures_provisional=None if checked.quiet else checked.conditions(),
    )
    if device == "cpu":
        isa = [f for f in machine.cpu_flags() if f.startswith(("avx", "fma", "sse4", "amx", "f16c", "bmi"))]
        return replace(
            measured,
            cpu_model=machine.cpu_model(),
            cores=machine.available_cores(),
            topology=machine.cpu_topology(),
            isa=isa,
            caches=machine.cache_sizes(),
        )
    import torch

    props = torch.cuda.get_device_properties(0)
    return replace(
        measured,
        gpu=props.name,
        sms=props.multi_processor_count,
        memory_gb=round(props.total_memory / 2**30, 1),
        capability=f"{props.major}.{props.minor}",
    )


@dataclass(frozen=True)
class SessionWork:
    """One session a run is to run: a new one for ``op_path``, or the stored one ``options.resume``
    names (its own stored options; ``stored_status`` as the bank had it; ``lease``: this process's
    hold on it, taken before the run began)."""

    op_path: Path
    options: OptimizeOptions
    stored_status: SessionStatus | None = None
    lease: SessionLease | None = None
    weight: float = 1.0  # its part of the run's limits against the other ops' (a model's op: its time share)


@dataclass(frozen=True)
class Placement:
    """Where a session's verifications run: this machine (``verifier`` None: a ``VerifierService``
    is made here), or the verifier a cluster gave it, on ``device``, beside ``at_once`` sessions."""

    verifier: Verifier | None = None
    device: Device | None = None
    at_once: int = 1


@dataclass(frozen=True)
class RunScope:
    """What every session of one run shares, whichever executor runs them: the settings, the
    limits, the bank, where events go, and the front end's stop control."""

    settings: ForgeSettings
    limits: Limits
    engine: Engine
    emit: ev.Emit
    control: RunControl | None = None


def open_session(
    work: SessionWork,
    scope: RunScope,
    ops_left: int = 1,
    placement: Placement = Placement(),
    weight_left: float | None = None,
) -> Session:
    """``work``'s session (a new one, or the stored one it resumes), ready to run, with its share
    of the run's limits (what is left, over the ``ops_left`` ops not yet done, its weight's part
    of ``weight_left``, theirs together, ``placement.at_once`` of them running at a time)."""
    limits, control = scope.limits, scope.control
    op_path, options = work.op_path, work.options
    settings = session_settings(scope.settings, options)
    device = placement.device or resolve_device(settings.device)
    backend = resolve_backend(options.backend, device)
    problem = load_problem(op_path)
    # a cluster's sessions verify on other machines: the driver's figures would mislead the coder
    figures = checked_figures(device, settings) if placement.verifier is None else None  # rooflines read them
    facts = machine_facts(device, figures) if options.model and figures is not None else MachineFacts(device)
    # Inductor's code is generated for the machine that captures it: not where a cluster verifies
    inductor = settings.inductor_candidate and placement.verifier is None
    # where this machine verifies, whether its CPU runs 512-bit vectors; a cluster's: not known
    wide_simd = placement.verifier is not None or "avx512f" in machine.cpu_flags()
    agents = make_agents(op_path, options.agents, backend, options.train, inductor, wide_simd)
    op_hash = reference_hash(problem)
    local: VerifierService | None = None
    verifier = placement.verifier
    if verifier is None:
        verifier = local = VerifierService(op_path, settings, device, options.workers, limits.stop_requested)
    if control is not None:  # a stop ends the workers of the brief's null control too
        control.attach(verifier)
    try:
        # the brief's eager and compile figures come from this verifier's own pairs (a null control)
        brief = measure_op_brief(op_path, op_hash, device, settings, local) if options.model and figures else None
        plan = SessionPlan(
            op_path, problem.spec, op_hash, problem.target_class_path, device, backend, options, facts, brief
        )
        stored = StoredOptions.of(options, op_path, device, backend)
        io, state = _session_io(work, scope, plan, agents.kind, stored)
    except BaseException:
        if local is not None:
            local.close()
        raise
    # taken last: opening the session is not its own time; released when it ends (run_session)
    io.share = limits.share(
        ops_left, placement.at_once, spent_before=io.spend.cost_usd, weight=work.weight, weight_left=weight_left
    )
    return Session(plan, agents, io, verifier, settings, state)


def _session_io(
    work: SessionWork, scope: RunScope, plan: SessionPlan, agent: AgentKind, stored: StoredOptions
) -> tuple[SessionIO, SearchState | None]:
    """The session's row (started with its ``stored`` options, or the stored one reopened) and
    what it writes through; a resumed session's search state."""
    engine, emit, limits, options = scope.engine, scope.emit, scope.limits, work.options
    if options.resume is None:
        recorder = SessionRecorder.start(
            engine,
            plan.spec,
            plan.op_hash,
            plan.target,
            strategy=options.strategy,
            agent=str(agent),
            model=options.model if agent is AgentKind.LLM else None,
            settings=stored.to_json(),
        )
        return SessionIO(recorder, SessionEvents(emit, plan.spec.name, recorder.session_id), limits), None
    assert work.lease is not None and work.lease.session_id == options.resume  # taken when the run began
    state, spend = restore_state(load_session(engine, options.resume))
    recorder = SessionRecorder.reopen(engine, work.lease, options.round_limit)
    return SessionIO(recorder, SessionEvents(emit, plan.spec.name, recorder.session_id), limits, spend), state


def run_session(session: Session, stored_status: SessionStatus | None = None) -> SessionResult:
    """The search, then the session's end (confirm, bank), whatever stopped the search; or, with
    ``bank_attempt``, only that attempt's confirmation (the session keeps ``stored_status``)."""
    started = time.monotonic()
    try:
        result = _run(session, stored_status)
    except SessionTakenOverError as exc:  # another driver runs it now: stop, and write nothing more
        KEEPER.drop(session.io.recorder.lease)
        session.verifier.end_workers()
        result = session.taken_over(exc.message)
    finally:
        session.io.limits.release(session.io.share)
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _run(session: Session, stored_status: SessionStatus | None) -> SessionResult:
    session.start()
    if session.options.bank_attempt is not None:
        kept = stored_status or SessionStatus.FINISHED
        if kept is SessionStatus.RUNNING:  # its driver died: it stays cut short (resumable), its lease given back
            kept = SessionStatus.CRASHED
        return session.bank_by_hand(session.options.bank_attempt, kept)
    try:
        session.verify_pending()
        status, reason = STRATEGIES[session.options.strategy](session)
    except ProviderError as exc:  # the provider went away mid-session: stop cleanly, resumable
        return session.finish(SessionStatus.PROVIDER_ERROR, exc.message)
    except MachineStayedBusy as exc:  # nothing more is timed under a load that stays: resumable
        return session.finish(SessionStatus.BUSY, exc.still.reason(session.resume_command))
    except KeyboardInterrupt:
        session.verifier.end_workers()
        return session.finish(SessionStatus.INTERRUPTED, INTERRUPTED_REASON)
    return session.finish(status, reason)
