"""``optimize_plan``: a parallel-plan session for one model file, from its checks before anything
runs to the banked plan. User mistakes (a bad mesh, a model that does not run on its own inputs,
more ranks than this machine can spawn) raise ``UsageError`` (exit 2) before a session starts."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError
from sqlalchemy import Engine

from forge.agents import PlanTried, check_provider, make_plan_agents
from forge.core.choices import Strategy
from forge.core.errors import BankError, ProblemError, ProviderError, UsageError
from forge.core.exit_codes import ExitCode
from forge.core.parallel_plan import structure_hash
from forge.core.problem import Problem, load_problem, reference_hash
from forge.core.settings import ForgeSettings
from forge.core.statuses import AttemptStatus, SessionStatus
from forge.db import (
    Driver,
    PlanProvenance,
    PlanTarget,
    SessionLease,
    check_held,
    claim_session,
    load_session,
    measured_plans,
    open_for_writing,
    save_plan,
)
from forge.db import sessions as session_rows
from forge.harness import events as ev
from forge.harness.plans.options import PlanOptions, StoredPlanOptions
from forge.harness.plans.session import PlanSession, PlanState, PlanWork, as_prediction, restore_plan_state
from forge.harness.runs.control import RunControl
from forge.harness.runs.limits import Limits, ctrl_c_stops
from forge.harness.sessions.leases import close_leases, give_back, hold_lease
from forge.parallel import Machine, max_local_ranks, measure_link, model_facts
from forge.parallel.plan_search import module_tree
from forge.verifier.machine import facts as machine


@dataclass
class PlanResult:
    """What ``forge plan`` reports: the banked plan (or why none), with the
    prediction beside the measurement and the cost model's error before and after calibration."""

    problem: str
    session_id: int
    status: SessionStatus
    plan_id: int | None = None
    attempt_id: int | None = None
    mesh: str | None = None
    note: str = ""
    measured_ms: float | None = None
    predicted_ms: float | None = None  # the cost model's step for it, uncalibrated
    simulated: bool = False
    attempts: int = 0
    runs: int = 0  # plans run for real
    error_before: float | None = None  # mean relative error of the step, uncalibrated
    # the same for the predictions calibrated on the session's earlier runs only, as each was made
    # before its own run (from the second run on): never fitted to the run it is judged against
    error_after: float | None = None
    reason: str | None = None
    tokens: int = 0
    cost_usd: float | None = None
    ranked: list[dict[str, Any]] = field(default_factory=list)  # every plan that reached the cost model

    @property
    def accepted(self) -> bool:
        return self.plan_id is not None

    @property
    def exit_code(self) -> int:
        if self.status is SessionStatus.INTERRUPTED:
            return ExitCode.INTERRUPTED
        if self.status is SessionStatus.PROVIDER_ERROR:
            return ExitCode.PROVIDER
        if self.accepted:
            return ExitCode.SUCCESS
        return ExitCode.LIMIT if self.status.hit_limit else ExitCode.NO_RESULT

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if k == "status" else v) for k, v in self.__dict__.items()}


def _runs_on_its_inputs(problem: Problem, train: bool) -> None:
    """ProblemError unless the model builds and runs on its inputs; UsageError unless, for
    training, it backpropagates."""
    torch.manual_seed(0)
    problem.check_runs(forward=True)
    if not train:
        return
    try:
        out = problem.build_model()(*problem.inputs())
        first = out[0] if isinstance(out, tuple | list) else out
        first.float().pow(2).mean().backward()
    except Exception as exc:
        raise UsageError(
            f"{problem.spec.path}: the model does not run a training step on its own inputs "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); fix Model or get_inputs"
        ) from None


def _load(model_path: Path, options: PlanOptions) -> Problem:
    if not model_path.is_file():
        raise UsageError(f"{str(model_path)!r}: no such model file")
    try:
        problem = load_problem(model_path)
    except ProblemError as exc:
        raise UsageError(exc.message) from None
    _runs_on_its_inputs(problem, options.train)
    if not options.simulate:
        most, why = max_local_ranks()
        if options.world_size > most:
            raise UsageError(
                f"--world-size {options.world_size}: this machine can spawn {most} ranks ({why}); pass --simulate "
                "to rank plans with the cost model alone"
            )
    return problem


def _work(model_path: Path, problem: Problem, options: PlanOptions, settings: ForgeSettings) -> PlanWork:
    torch.manual_seed(0)
    model = problem.build_model()
    inputs = list(problem.module.get_inputs())
    # one rank: one thread (the real run's ranks are pinned so), its measured matmul peak
    figures = machine.measured_figures("cpu", 1, settings.cache_path())
    link = measure_link(settings.cache_path() / "link.json", world_size=min(options.world_size, 2))
    # simulated meshes are clusters (a device a rank); a real run's ranks share this machine's cores
    cores = 0 if options.simulate else machine.available_cores()
    fitted = Machine(
        peak_flops=figures.peak_gflops * 1e9, link_bytes_per_s=link.bytes_per_s, latency_s=link.latency_s, cores=cores
    )
    device = f"CPU processes over gloo ({figures.device_name}, one thread a rank)"
    facts = model_facts(copy.deepcopy(model), inputs)
    return PlanWork(model_path, problem.spec, model, inputs, facts, fitted, module_tree(model, inputs), device, options)


def _calibrated_error(tried: list[PlanTried]) -> float | None:
    pairs = [
        (t.evidence.prediction.calibrated_step_ms, t.evidence.measured.step_ms)
        for t in tried
        if t.evidence.prediction is not None and t.evidence.measured is not None
    ]
    errors = [abs(p - m) / m for p, m in pairs if p is not None and m > 0]
    return sum(errors) / len(errors) if errors else None


def _best_predicted(tried: list[PlanTried]) -> PlanTried | None:
    """The plan with the lowest predicted step among those ranked by the model alone."""
    steps = {
        t.attempt_id: t.evidence.prediction.calibrated_step_ms or t.evidence.prediction.step_ms
        for t in tried
        if t.evidence.status is AttemptStatus.PREDICTED and t.evidence.prediction is not None
    }
    return min((t for t in tried if t.attempt_id in steps), key=lambda t: steps[t.attempt_id], default=None)


def _finish(session: PlanSession, status: SessionStatus, reason: str | None, problem: Problem) -> PlanResult:
    state, options = session.state, session.options
    cal = state.calibration
    result = PlanResult(
        problem=problem.spec.name,
        session_id=session.session_id,
        status=status,
        simulated=options.simulate,
        attempts=len(state.tried),
        runs=len(cal.seen),
        error_before=cal.error(calibrated=False),
        error_after=_calibrated_error(state.tried),
        reason=reason,
        tokens=session.spend.tokens,
        cost_usd=session.spend.cost_reported,
    )
    result.ranked = [
        {
            "attempt_id": t.attempt_id,
            "mesh": t.evidence.mesh,
            "status": str(t.evidence.status),
            "predicted_ms": t.evidence.prediction.step_ms if t.evidence.prediction else None,
            "calibrated_ms": t.evidence.prediction.calibrated_step_ms if t.evidence.prediction else None,
            "measured_ms": t.evidence.measured.step_ms if t.evidence.measured else None,
            "note": t.plan.note if t.plan else "",
        }
        for t in state.tried
        if t.evidence.prediction is not None
    ]
    _bank_best(session, result, problem)
    # the session's end is written after its plan is banked: a failed banking leaves it resumable
    session_rows.update_session(
        session.engine, session.lease, status=status, tokens=session.spend.tokens, cost_usd=session.spend.cost_reported
    )
    give_back(session.engine, session.lease)
    return result


def _bank_best(session: PlanSession, result: PlanResult, problem: Problem) -> None:
    """Bank the session's best plan (simulated: its best predicted) and say so in ``result``."""
    state, options = session.state, session.options
    chosen = state.best if not options.simulate else _best_predicted(state.tried)
    if chosen is None or chosen.plan is None:
        result.reason = result.reason or ("no plan was ranked" if options.simulate else "no plan passed its real run")
        return
    target = PlanTarget(
        reference_hash(problem),
        structure_hash(session.work.model),
        options.world_size,
        chosen.evidence.mesh,
        "cpu",
        options.train,
    )
    agent = "llm" if options.model else "builtin"
    check_held(session.engine, session.lease)  # a driver that was taken over banks nothing
    plan_id = save_plan(
        session.engine,
        problem.spec,
        target,
        chosen.plan,
        chosen.evidence,
        PlanProvenance(session.session_id, chosen.attempt_id, agent, options.model),
        status="predicted" if options.simulate else "active",
    )
    e = chosen.evidence
    result.plan_id, result.attempt_id, result.mesh, result.note = plan_id, chosen.attempt_id, e.mesh, chosen.plan.note
    result.measured_ms = e.measured.step_ms if e.measured else None
    result.predicted_ms = e.prediction.step_ms if e.prediction else None
    session.emit(
        ev.PlanBanked(
            problem.spec.name,
            session.session_id,
            plan_id,
            chosen.attempt_id,
            e.mesh,
            result.measured_ms,
            result.predicted_ms,
            options.simulate,
        )
    )


def _open(
    model_path: Path | None, options: PlanOptions, engine: Engine
) -> tuple[Path, PlanOptions, PlanState, SessionLease | None]:
    """The model file, options and state a session starts from: as given, or the stored session's
    (whose lease is taken first, so that what is checked is what this driver continues)."""
    if options.resume is None:
        if model_path is None:
            raise UsageError("forge plan takes one model file (MODEL.py with Model, get_inputs, get_init_inputs)")
        return model_path, options, PlanState(), None
    lease = hold_lease(engine, claim_session(engine, options.resume, Driver.this_process()))
    stored = load_session(engine, options.resume)
    if stored.strategy != Strategy.PARALLEL:
        raise UsageError(f"session {options.resume} is a kernel session: resume it with forge optimize --resume")
    try:
        settings = StoredPlanOptions.read(stored.settings)
    except (ValidationError, BankError) as exc:
        said = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else exc.message
        raise BankError(f"session {stored.id}'s stored settings cannot be read ({said})") from exc
    done = settings.round_limit
    more = options.rounds is not None and options.rounds > done
    if stored.status is SessionStatus.FINISHED and not more:
        raise UsageError(
            f"session {stored.id} already finished its {done} rounds; continue it with more "
            f"(`forge plan --resume {stored.id} --rounds {done + 2}`)"
        )
    return Path(settings.op_path), settings.resumed(options), restore_plan_state(stored), lease


def optimize_plan(
    model_path: Path | None,
    options: PlanOptions,
    settings: ForgeSettings | None = None,
    emit: ev.Emit = ev.ignore,
    control: RunControl | None = None,
) -> PlanResult:
    """Search for a parallel plan for the model in ``model_path`` and bank the fastest that passes
    its real run (with ``simulate``: the best predicted, banked as predicted); with
    ``options.resume``, continue that stored plan session. Raises ForgeError for bad input."""
    settings = settings or ForgeSettings()
    if options.resume is None:
        options.check()  # before the bank is opened (and perhaps created) for a mistyped command
    engine = open_for_writing(options.bank)
    try:
        model_path, options, state, resumed = _open(model_path, options, engine)
        options.check()
        check_provider(options.agents)
        problem = _load(model_path, options)
        limits = Limits(budget_usd=options.budget_usd, time_limit_s=options.time_limit_s)
        if control is not None:
            limits.stop_requested = control.stop_requested
        work = _work(model_path, problem, options, settings)
        agents = make_plan_agents(options.agents)
        agent = "llm" if agents is not None else "builtin"
        if resumed is None:
            lease = hold_lease(
                engine,
                session_rows.start_session(
                    engine,
                    problem.spec,
                    reference_hash(problem),
                    None,
                    Strategy.PARALLEL,
                    agent,
                    options.model,
                    options.to_json(model_path),
                    Driver.this_process(),
                ),
            )
        else:
            lease = resumed
            session_rows.reopen_session(engine, lease, {"rounds": options.round_limit})
        session_id = lease.session_id
        if options.simulate and resumed is None:  # no run of its own to calibrate on: this machine's earlier runs
            for e in measured_plans(engine):
                assert e.prediction is not None and e.measured is not None
                state.calibration.add(as_prediction(e.prediction), e.measured.step_ms / 1000)
        session = PlanSession(work, engine, lease, limits, emit, agents, state)
        what = f"plans for {options.world_size} ranks" + (" (simulated)" if options.simulate else "")
        emit(
            ev.SessionStarted(
                problem.spec.name,
                session_id,
                Strategy.PARALLEL,
                agent,
                options.model,
                "cpu",
                what,
                resumed=resumed is not None,
            )
        )
        return _run(session, limits, problem)
    finally:
        close_leases(engine)
        engine.dispose()


def _run(session: PlanSession, limits: Limits, problem: Problem) -> PlanResult:
    with ctrl_c_stops(limits):
        try:
            status = session.run_llm() if session.agents is not None else session.run_builtin()
            reason = None if status is SessionStatus.FINISHED else f"stopped: {status}"
        except ProviderError as exc:
            status, reason = SessionStatus.PROVIDER_ERROR, exc.message
        except KeyboardInterrupt:
            status, reason = SessionStatus.INTERRUPTED, "interrupted; every plan tried so far is recorded (--resume)"
    return _finish(session, status, reason, problem)
