"""One parallel-plan session over one model: each plan goes up the ladder (static rules, the cost
model and the memory limit, then a real run on local ranks), every rung's result is recorded as
the session's attempt at once, and the fastest plan that passed its real run is banked.

The built-in agent takes ``forge.parallel``'s candidates, ranked by predicted step, and runs the
best ``rounds`` of them, ranking the rest again by the prediction calibrated on the runs so far.
The LLM planner proposes one plan a round from the model's source, module tree and the plans
tried so far; the advisor reads each plan's measured and predicted step and its advice goes into
the next prompt. ``simulate`` never runs anything: every plan is ranked by the calibrated model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from torch import nn

from forge.agents import PlanAgents, PlanContext, PlanProposal, PlanTried
from forge.core.parallel_plan import ParallelPlan
from forge.core.plan_evidence import PlanEvidence, PlanMeasurement, PlanPrediction
from forge.core.problem import ProblemSource
from forge.core.statuses import AttemptRole, AttemptStatus, SessionStatus
from forge.db import SessionLease, StoredSession, add_plan_attempt
from forge.harness import events as ev
from forge.harness.plans.options import PlanOptions
from forge.harness.runs.limits import Limits, Spend
from forge.parallel import Calibration, Machine, Prediction, Screened, candidate_plans, run_plan, screen
from forge.parallel.cost_model import ModelFacts


@dataclass(frozen=True)
class PlanWork:
    """What a plan session works on, fixed before it starts."""

    model_path: Path
    spec: ProblemSource
    model: nn.Module  # built once in this process: the static rules and the cost model read it
    inputs: Sequence[Any]
    facts: ModelFacts
    machine: Machine
    module_tree: str
    device: str  # what the ranks run on, in words
    options: PlanOptions


@dataclass
class PlanState:
    round: int = 0
    tried: list[PlanTried] = field(default_factory=list)
    best: PlanTried | None = None  # the fastest measured plan that passed
    calibration: Calibration = field(default_factory=Calibration)
    advice: str = ""

    def add(self, tried: PlanTried) -> None:
        """One more plan tried; the best is the fastest measured one that passed."""
        self.tried.append(tried)
        e, best = tried.evidence, self.best
        if not e.passed or e.measured is None:
            return
        if best is None or best.evidence.measured is None or e.measured.step_ms < best.evidence.measured.step_ms:
            self.best = tried


def restore_plan_state(stored: StoredSession) -> PlanState:
    """A stored plan session's state: every plan it tried, the best that passed, and the cost
    model calibrated on its real runs (resume goes on from there, running none of them again)."""
    state = PlanState()
    for a in stored.attempts:
        if a.role is not AttemptRole.PLAN or a.plan_evidence is None:
            continue
        plan = ParallelPlan.from_json(json.loads(a.source)) if a.source else None
        e = a.plan_evidence
        state.add(PlanTried(a.id, plan, e))
        state.round = max(state.round, a.round)
        if e.passed and e.measured is not None and e.prediction is not None:
            state.calibration.add(as_prediction(e.prediction), e.measured.step_ms / 1000)
    return state


def _prediction(p: Prediction, calibration: Calibration) -> PlanPrediction:
    calibrated = calibration.step_s(p) * 1000 if calibration.seen else None
    return PlanPrediction(
        memory_bytes=p.memory_bytes,
        compute_ms=p.compute_s * 1000,
        comm_ms=p.comm_s * 1000,
        comm_bytes=p.comm_bytes,
        collectives=p.collectives,
        step_ms=p.step_s * 1000,
        calibrated_step_ms=calibrated,
    )


def as_prediction(p: PlanPrediction) -> Prediction:
    """A stored prediction back as the cost model's record (calibrating from stored runs)."""
    return Prediction(p.memory_bytes, p.compute_ms / 1000, p.comm_ms / 1000, p.comm_bytes, p.collectives)


class PlanSession:
    def __init__(
        self,
        work: PlanWork,
        engine: Engine,
        lease: SessionLease,
        limits: Limits,
        emit: ev.Emit,
        agents: PlanAgents | None,
        state: PlanState | None = None,
    ) -> None:
        self.work, self.engine, self.lease, self.limits = work, engine, lease, limits
        self.session_id = lease.session_id
        self.emit, self.agents = emit, agents
        self.state = state or PlanState()
        self.spend = Spend()

    @property
    def options(self) -> PlanOptions:
        return self.work.options

    def _evidence(self, plan: ParallelPlan, status: AttemptStatus, reason: str, **extra: Any) -> PlanEvidence:
        return PlanEvidence(
            status=status,
            reason=reason,
            world_size=self.options.world_size,
            mesh=plan.mesh_text(),
            train=self.options.train,
            device_kind="cpu",
            **extra,
        )

    def screen(self, plan: ParallelPlan) -> Screened:
        """The cheap rungs: the static rules, then the cost model and the memory limit."""
        w = self.work
        return screen(
            w.model,
            w.inputs,
            plan,
            w.facts,
            w.machine,
            world_size=self.options.world_size,
            train=self.options.train,
            memory_limit_bytes=self.options.memory_limit_bytes,
        )

    def ladder(self, plan: ParallelPlan, screened: Screened | None = None) -> PlanEvidence:
        """The plan up the rungs (the cheap ones from ``screened`` when already taken), stopping
        at the first it fails."""
        w = self.work
        screened = screened or self.screen(plan)
        predicted = _prediction(screened.prediction, self.state.calibration) if screened.prediction else None
        if screened.refused is not None:
            return self._evidence(
                plan, AttemptStatus.REFUSED, screened.refused, checks=screened.checks, prediction=predicted
            )
        assert screened.prediction is not None and predicted is not None
        if self.options.simulate:
            why = "ranked by the calibrated cost model alone (--simulate): predicted, not measured"
            return self._evidence(plan, AttemptStatus.PREDICTED, why, checks=screened.checks, prediction=predicted)
        run = run_plan(
            w.model_path,
            plan,
            self.options.world_size,
            train=self.options.train,
            steps=self.options.steps,
            timeout_s=self.options.run_timeout_s,
        )
        measured = None
        if run.ok and run.step_ms is not None:
            measured = PlanMeasurement(
                step_ms=run.step_ms, peak_rss_mb=run.peak_rss_mb or 0.0, rank_step_ms=[r.median_ms for r in run.ranks]
            )
            self.state.calibration.add(screened.prediction, run.step_ms / 1000)
        return self._evidence(
            plan, run.status, run.reason, checks=screened.checks, prediction=predicted, measured=measured
        )

    def record(
        self, plan: ParallelPlan | None, evidence: PlanEvidence, proposal: PlanProposal | None = None
    ) -> PlanTried:
        got = proposal or PlanProposal(plan, None, "", "")
        attempt_id = add_plan_attempt(
            self.engine,
            self.lease,
            self.state.round,
            plan=plan,
            evidence=evidence,
            prompt=got.prompt or None,
            response=got.response or None,
            tokens=got.tokens,
            cost_usd=got.cost_usd,
        )
        tried = PlanTried(attempt_id, plan, evidence)
        self.state.add(tried)
        p = evidence.prediction
        self.emit(
            ev.PlanChecked(
                self.work.spec.name,
                self.session_id,
                self.state.round,
                attempt_id,
                evidence.mesh,
                plan.note if plan is not None else "",
                evidence.status,
                evidence.reason,
                (p.calibrated_step_ms or p.step_ms) if p else None,
                evidence.measured.step_ms if evidence.measured else None,
                p.memory_bytes / 2**20 if p else None,
            )
        )
        return tried

    def _stop(self) -> SessionStatus | None:
        if self.limits.stop_requested.is_set():
            raise KeyboardInterrupt
        return self.limits.exceeded()

    def run_builtin(self) -> SessionStatus:
        """Screen every candidate (refusals recorded), then run the best-ranked ones for real."""
        w = self.work
        ranked: list[tuple[Screened, Prediction]] = []
        done = [t.plan for t in self.state.tried if t.evidence.status is not AttemptStatus.PREDICTED]
        for plan in candidate_plans(w.model, w.inputs, self.options.world_size, self.options.mesh_shape()):
            if plan in done:  # a resumed session: tried already
                continue
            screened = self.screen(plan)
            if screened.refused is not None or screened.prediction is None:
                self.record(plan, self.ladder(plan, screened))
            else:
                ranked.append((screened, screened.prediction))
        budget = len(ranked) if self.options.simulate else self.options.round_limit
        while ranked and self.state.round < budget:
            if (status := self._stop()) is not None:
                return status
            ranked.sort(key=lambda pair: self.state.calibration.step_s(pair[1]))
            chosen, _prediction_then = ranked.pop(0)
            self.state.round += 1
            if not self.options.simulate:
                self.emit(ev.RoundStarted(w.spec.name, self.session_id, self.state.round, budget))
            self.record(chosen.plan, self.ladder(chosen.plan, chosen))
        for left, prediction in ranked:  # recorded too: every candidate's fate is in the session
            why = f"not run: ranked below the {budget} plans that were (--rounds)"
            predicted = _prediction(prediction, self.state.calibration)
            self.record(left.plan, self._evidence(left.plan, AttemptStatus.PREDICTED, why, prediction=predicted))
        return SessionStatus.FINISHED

    def _context(self) -> PlanContext:
        w = self.work
        return PlanContext(
            model_name=w.spec.name,
            model_source=w.spec.source,
            module_tree=w.module_tree,
            world_size=self.options.world_size,
            mesh=self.options.mesh_shape(),
            train=self.options.train,
            device=w.device,
            memory_limit_gib=self.options.memory_per_device_gib,
            history=list(self.state.tried),
            advice=self.state.advice,
        )

    def _charge(self, tokens: int, cost_usd: float | None, known: bool) -> None:
        self.limits.charge(tokens, cost_usd, known)
        self.spend.add(tokens, cost_usd, known)
        self.emit(ev.CostUpdated(self.work.spec.name, self.session_id, self.limits.tokens, self.limits.cost_reported))

    def run_llm(self) -> SessionStatus:
        """One plan a round from the planner, up the ladder, then the advisor's reading of it."""
        assert self.agents is not None
        name, rounds = self.work.spec.name, self.options.round_limit
        while self.state.round < rounds:
            if (status := self._stop()) is not None:
                return status
            self.state.round += 1
            self.emit(ev.RoundStarted(name, self.session_id, self.state.round, rounds))
            proposal = self.agents.planner.propose(self._context())
            self._charge(proposal.tokens, proposal.cost_usd, proposal.cost_known)
            plan = proposal.plan
            if plan is None:
                blank = ParallelPlan(mesh={"dp": 1, "tp": self.options.world_size})
                evidence = self._evidence(blank, AttemptStatus.INVALID_REPLY, proposal.error or "no plan")
                tried = self.record(None, evidence, proposal)
                self.emit(
                    ev.CandidateProposed(
                        name, self.session_id, self.state.round, tried.attempt_id, error=evidence.reason
                    )
                )
                continue
            same = next((t for t in self.state.tried if t.plan == plan), None)
            evidence = (
                self._evidence(plan, AttemptStatus.REFUSED, f"the same plan as attempt {same.attempt_id}")
                if same is not None
                else self.ladder(plan)
            )
            tried = self.record(plan, evidence, proposal)
            if (status := self._stop()) is not None:
                return status
            advice = self.agents.advisor.advise(self._context(), tried)
            self._charge(advice.tokens, advice.cost_usd, advice.cost_known)
            self.state.advice = advice.text
            self.emit(
                ev.JudgeReviewed(
                    name,
                    self.session_id,
                    self.state.round,
                    tried.attempt_id,
                    diagnosis="",
                    bottleneck="",
                    next_step=advice.text,
                    continue_search=True,
                )
            )
        return SessionStatus.FINISHED
