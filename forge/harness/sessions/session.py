"""One optimisation session over one op: the steps it takes, in order, over the search's state
(``search_state.py``).

A strategy (``search.py``) drives it: ``propose`` (the coder, ``steps.propose``), ``evaluate``
(``steps.verify``, ``steps.record_verdict`` and ``steps.review`` for each verdict), and at the end
``finish``: the confirm step (``confirm.py``) and the bank step (``banking.py``). What each step
produced is in the bank as soon as it exists (``SessionIO``), so ``--resume`` continues a killed
session from there (``resume.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.agents import AgentKind, Agents, CoderContext, HistoryItem, MachineFacts
from forge.core.acceptance import TrainingStanding, beats_compile, training_standing
from forge.core.errors import UsageError
from forge.core.figures import judged_roofline
from forge.core.op_brief import OpBrief
from forge.core.problem import ProblemSource
from forge.core.settings import ForgeSettings
from forge.core.statuses import AttemptStatus, SessionStatus
from forge.core.verdict import Verdict
from forge.db import remove_provisional
from forge.harness import events as ev
from forge.harness.runs.limits import RoundClock
from forge.harness.runs.options import OptimizeOptions
from forge.harness.sessions import steps
from forge.harness.sessions.banking import bank_kernel
from forge.harness.sessions.confirm import Contender, confirm_finalists, finalists
from forge.harness.sessions.matching import round_choice
from forge.harness.sessions.search_state import SearchState, TracePoint, no_gain_reason
from forge.harness.sessions.steps import Candidate, Proposed, QuietWaiter, SessionIO
from forge.verifier import Verifier, wait_for_quiet_machine

INTERRUPTED_REASON = "interrupted (Ctrl-C, or stop in the TUI); `--resume` continues the session"


@dataclass(frozen=True)
class SessionPlan:
    """What a session works on, fixed before it starts."""

    op_path: Path
    spec: ProblemSource
    op_hash: str
    target: str | None  # "module:Class" when the op's Model comes from user code
    device: str
    backend: str
    options: OptimizeOptions
    machine: MachineFacts
    brief: OpBrief | None = None  # measured for an LLM session verifying on this machine


@dataclass
class SessionResult:
    problem: str
    session_id: int
    status: SessionStatus
    accepted: bool = False
    kernel_id: int | None = None
    backend: str | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    # The regime the speedups above were judged in, and the accepted kernel's figures in each
    # regime ({"cold": {"eager": x, "compile": y}, "warm": {...}}).
    regime: str | None = None
    regimes: dict[str, dict[str, float | None]] = field(default_factory=dict)
    attempts: int = 0
    reason: str | None = None
    tokens: int = 0
    cost_usd: float | None = None
    trace: list[TracePoint] = field(default_factory=list)
    # The accepted kernel is worth it in eager alone: kernelize leaves it off under torch.compile
    eager_only: bool | None = None
    compile_why: str | None = None
    share_s: float | None = None  # its share of the run's time limit and budget (``OpShare``)
    share_usd: float | None = None
    training: TrainingStanding | None = None  # a training session's banked kernel: used under autograd?
    seconds: float | None = None  # the session's wall time in this run, its confirmation included
    # the banked kernel's fraction of its roofline bound in the judged regime, and eager's (None:
    # no bound that holds for the op, e.g. judged warm with only DRAM's)
    bound_fraction: float | None = None
    eager_bound_fraction: float | None = None
    compile_bound_fraction: float | None = None  # torch.compile's code's, in the same regime

    def to_json(self) -> dict[str, Any]:
        """The op's entry in ``forge optimize --json``."""
        keys = ("problem", "accepted", "kernel_id", "backend", "speedup_vs_eager", "speedup_vs_compile")
        out = {k: getattr(self, k) for k in keys}
        out.update(regime=self.regime, regimes=self.regimes, eager_only=self.eager_only, compile_why=self.compile_why)
        out.update(attempts=self.attempts, session_id=self.session_id, status=str(self.status))
        out.update(share_s=self.share_s, share_usd=self.share_usd, tokens=self.tokens, cost_usd=self.cost_usd)
        out["seconds"] = self.seconds
        out.update(
            bound_fraction=self.bound_fraction,
            eager_bound_fraction=self.eager_bound_fraction,
            compile_bound_fraction=self.compile_bound_fraction,
        )
        out["training"] = self.training.model_dump() if self.training is not None else None
        out["reason"] = None if self.accepted else self.reason
        return out


def regime_figures(v: Verdict) -> tuple[str | None, dict[str, dict[str, float | None]]]:
    """The verdict's judged regime, and its speedups in each regime that was timed."""
    ts = v.timing_stats
    figures: dict[str, dict[str, float | None]] = {}
    for name, eager, compiled in (
        ("cold", ts.paired_eager, ts.paired_compile),
        ("warm", ts.warm_paired_eager, ts.warm_paired_compile),
    ):
        if eager is not None:
            figures[name] = {"eager": eager.median, "compile": compiled.median if compiled is not None else None}
    return (str(ts.regime) if ts.regime is not None else None), figures


class Session:
    """The search over one op: a strategy calls ``context``, ``propose`` and ``evaluate``, then ``finish``."""

    def __init__(
        self,
        plan: SessionPlan,
        agents: Agents,
        io: SessionIO,
        verifier: Verifier,
        settings: ForgeSettings,
        state: SearchState | None = None,
        waiter: QuietWaiter | None = None,
    ) -> None:
        self.plan, self.agents, self.io, self.verifier, self.settings = plan, agents, io, verifier, settings
        self.resumed = state is not None
        self.state = state or SearchState()
        # the bounded wait for a quiet machine after a verification timed under load
        self.waiter = waiter or wait_for_quiet_machine
        self.clock = RoundClock()  # its rounds in this run: what a time limit keeps back for confirming

    @property
    def id(self) -> int:
        return self.io.recorder.session_id

    @property
    def options(self) -> OptimizeOptions:
        return self.plan.options

    @property
    def resume_command(self) -> str:
        return self.options.resume_command(self.id)

    @property
    def node_host(self) -> str | None:
        """The cluster node the session's verifications run on (None: this machine)."""
        return self.verifier.node.label if self.verifier.node is not None else None

    def context(self, parent: HistoryItem | None, want: int = 1) -> CoderContext:
        return CoderContext(
            op_name=self.plan.spec.name,
            op_source=self.plan.spec.source,
            device=self.plan.device,
            backend=self.plan.backend,
            machine=self.plan.machine,
            brief=self.plan.brief,
            round=self.state.round,
            rounds=self.options.round_limit,
            history=list(self.state.history),
            want=want,
            best_of=self.options.best_of,
            parent=parent,
            on_reply=self._reply_progress if self.options.stream_replies else None,
            train=self.options.train,
        )

    def _reply_progress(self, role: str, text: str) -> None:
        self.io.events(ev.ReplyProgress, round=self.state.round, role=role, text=text)

    def start(self) -> None:
        p = self.plan
        self.io.events(
            ev.SessionStarted,
            strategy=p.options.strategy,
            agent=str(self.agents.kind),
            model=p.options.model,
            device=p.device,
            backend=p.backend,
            resumed=self.resumed,
            share_s=share.time_s if (share := self.io.share) else None,
            share_usd=share.budget_usd if share else None,
            shared_among=share.ops_left if share else 1,
            node=self.node_host,
        )

    def propose(self, parent: HistoryItem | None, want: int = 1) -> Proposed:
        """The propose step; replies without a candidate go into the history at once (the coder sees why)."""
        got = steps.propose(self.agents.coder, self.context(parent, want), self.state.round, self.io)
        for item in got.invalid:  # (a fatal reply after some of them leaves them in the history too)
            self.state.add(item)
        return got

    def evaluate(self, candidates: list[Candidate], review_best: bool = False) -> list[HistoryItem]:
        """Verify a batch (in parallel with --workers), record each verdict, ask the judge about
        each (``review_best``: about the batch's best alone, ``round_choice``: the candidates of one
        reply, timed together when several passed, whose figures decide between them) and return
        the items chosen; first, when the
        last verdict was timed on a busy machine, wait (bounded) for a quiet one. A judge whose
        reviews cost tokens is not asked in the last round (no coder call would read its advice),
        nor about an attempt that failed: its failing check, error and largest error reach the
        coder's next prompt as they are, and a second model's reading of them cost a request of
        5-10k tokens a round."""
        self._quiet_before_verifying()
        verdicts = steps.verify(self.verifier, candidates)
        items = [self._recorded(c, v) for c, v in zip(candidates, verdicts, strict=True)]
        last = self.state.round >= self.options.round_limit
        chosen = [round_choice(self.verifier, candidates, items, self.io, last)] if review_best and items else items
        if self.agents.judge.costs_tokens and self.state.round >= self.options.round_limit:
            return chosen
        for item in chosen:
            self._review(item, verdicts[items.index(item)])
        return chosen

    def _review(self, item: HistoryItem, verdict: Verdict) -> None:
        """The judge's review of ``item``, unless it failed and the judge's reviews cost tokens."""
        if self.agents.judge.costs_tokens and item.status != AttemptStatus.PASSED:
            return
        steps.review(self.agents.judge, self.context(item), item, verdict, self.io)

    def _recorded(self, candidate: Candidate, verdict: Verdict) -> HistoryItem:
        item = steps.record_verdict(candidate, verdict, self.io)
        self.state.add(item)
        self.state.consider(candidate.attempt_id, candidate.source, verdict, candidate.config)
        return item

    def _judged(self, candidate: Candidate, verdict: Verdict) -> HistoryItem:
        item = self._recorded(candidate, verdict)
        self._review(item, verdict)
        return item

    def _quiet_before_verifying(self) -> None:
        still = self._still_busy(self._last_busy())
        if still is not None:
            raise steps.MachineStayedBusy(still)

    def _last_busy(self) -> str | None:
        """The load the last verdict was timed under, when the machine was busy then."""
        last = self.state.history[-1] if self.state.history else None
        return last.figures.busy if last is not None and last.figures is not None else None

    def _still_busy(self, busy: str | None) -> steps.StillBusy | None:
        """After a verification timed under ``busy`` load: the bounded wait for a quiet machine
        (``quiet_wait_s``), and what stayed when the load did not go. A cluster's verifications
        run on another machine: this one's load says nothing of it."""
        if busy is None or self.verifier.node is not None:
            return None
        return steps.wait_for_quiet(busy, self.state.round, self.settings.quiet_wait_s, self.io, self.waiter)

    def verify_pending(self) -> None:
        """Verify the attempts a killed session left unverified (resume)."""
        for candidate in self.state.pending:
            (verdict,) = steps.verify(self.verifier, [candidate])
            self._judged(candidate, verdict)
        self.state.pending = []

    def finish(self, status: SessionStatus, reason: str | None) -> SessionResult:
        """The confirm and bank steps, then the session's row closed. An interrupted session banks
        the fastest that beat eager in its own round, marked unconfirmed; one that ended on a
        machine that stayed busy banks nothing and confirms nothing (``--resume`` does)."""
        state, spend = self.state, self.io.spend
        result = self._new_result(status)
        best, confirmed = (None if status is SessionStatus.BUSY else state.best), False
        if status not in (SessionStatus.INTERRUPTED, SessionStatus.BUSY):
            status, reason, best, confirmed = self._confirm(status, reason)
            result.status = status
        if best is not None and best.attempt_id in state.rejected:
            best = None  # its confirmation said no before the Ctrl-C
        if confirmed:  # a Ctrl-C before banked this session's round best unconfirmed: this run decides
            self.io.recorder.still_held()
            remove_provisional(self.io.recorder.engine, self.id)
        if best is not None:
            self._bank(best, confirmed, result)
        else:
            result.reason = reason or state.why_none()
            if status is SessionStatus.FINISHED and state.top is not None:
                status = result.status = SessionStatus.NO_GAIN
                result.reason = no_gain_reason(state.top.verdict, reason)
        self.io.recorder.totals(spend, status)
        return self._finished(result, status)

    def _confirm(
        self, status: SessionStatus, reason: str | None
    ) -> tuple[SessionStatus, str | None, Contender | None, bool]:
        """The confirm step: (status, reason, the finalist to bank, whether it was confirmed). Not
        timed on a machine that stayed busy after the last verdict was timed under load, nor
        after a finalist's was (the bounded wait, ``_still_busy``)."""
        state = self.state
        still = self._still_busy(self._last_busy()) if state.contenders else None
        if still is not None:
            return SessionStatus.BUSY, still.reason(self.resume_command), None, False
        try:
            outcome = confirm_finalists(
                finalists(state.contenders, keep=state.best, floor=state.floor),
                self.verifier,
                self.io,
                self.settings,
                state.round,
                self.io.limits.stop_requested,
                state.rejected,
                state.floor,
                self._still_busy,
            )
        except KeyboardInterrupt:  # Ctrl-C while confirming: bank what its own round measured
            self.verifier.end_workers()
            return SessionStatus.INTERRUPTED, INTERRUPTED_REASON, state.best, False
        best = outcome.chosen
        if best is None and outcome.busy is not None:
            status = SessionStatus.BUSY
        elif best is None and outcome.undecided:
            status = SessionStatus.UNCONFIRMED
        return status, outcome.reason(reason, self.resume_command), best, True

    def bank_by_hand(self, attempt_id: int, status: SessionStatus) -> SessionResult:
        """Bank one passed attempt the user picked: timed again exactly as the session's own
        finalists are (``confirm_finalists``), banked only if that confirmation holds up. The
        session keeps ``status`` (its stored one)."""
        state = self.state
        picked = next((c for c in state.contenders if c.attempt_id == attempt_id), None)
        if picked is None:
            raise UsageError(
                f"attempt {attempt_id} is not a passed attempt of session {self.id} that was faster than eager "
                "at the median: its confirmation could only refuse it"
            )
        result = self._new_result(status)
        try:
            outcome = confirm_finalists(
                [picked], self.verifier, self.io, self.settings, state.round, self.io.limits.stop_requested, set()
            )
        except KeyboardInterrupt:
            self.verifier.end_workers()
            outcome = None
        if outcome is not None and outcome.chosen is not None:
            self._bank(outcome.chosen, True, result)
        else:
            result.reason = outcome.reason(None, self.resume_command) if outcome is not None else INTERRUPTED_REASON
        self.io.recorder.totals(self.io.spend, status)  # reopening marked it running
        return self._finished(result, status)

    def taken_over(self, reason: str) -> SessionResult:
        """The session's end in this run after another driver took it over: reported as crashed
        here, while its record in the bank is the other driver's to write."""
        result = self._new_result(SessionStatus.CRASHED)
        result.reason = reason
        return self._finished(result, SessionStatus.CRASHED)

    def _new_result(self, status: SessionStatus) -> SessionResult:
        """The session's result before anything is banked: its trace and what it spent."""
        spend, trace, share = self.io.spend, self.state.trace, self.io.share
        return SessionResult(
            self.plan.spec.name,
            self.id,
            status,
            backend=self.plan.backend,
            tokens=spend.tokens,
            cost_usd=spend.cost_reported,
            trace=list(trace),
            attempts=len(trace),
            share_s=share.time_s if share else None,
            share_usd=share.budget_usd if share else None,
        )

    def _finished(self, result: SessionResult, status: SessionStatus) -> SessionResult:
        self.io.events(
            ev.SessionFinished,
            status=status,
            accepted=result.accepted,
            kernel_id=result.kernel_id,
            speedup_vs_eager=result.speedup_vs_eager,
            speedup_vs_compile=result.speedup_vs_compile,
            attempts=result.attempts,
            reason=result.reason,
        )
        self.verifier.close()
        return result

    def _bank(self, chosen: Contender, confirmed: bool, result: SessionResult) -> None:
        self.io.recorder.still_held()  # a driver that was taken over banks nothing
        model = self.options.model if self.agents.kind is AgentKind.LLM else None
        kid = bank_kernel(
            self.io.recorder.engine,
            self.plan.spec,
            chosen,
            confirmed=confirmed,
            session_id=self.id,
            agent=str(self.agents.kind),
            model=model,
            cost_usd=self.io.spend.cost_reported,
        )
        v = chosen.verdict
        result.accepted, result.kernel_id, result.backend = True, kid, v.backend
        result.speedup_vs_eager, result.speedup_vs_compile = v.speedup_vs_eager, v.speedup_vs_compile
        result.regime, result.regimes = regime_figures(v)
        roof = judged_roofline(v)
        if roof is not None and roof.holds:
            result.bound_fraction, result.eager_bound_fraction = roof.fraction_candidate, roof.fraction_eager
            result.compile_bound_fraction = roof.fraction_compile
        standing = beats_compile(v)
        result.eager_only, result.compile_why = not standing.beats, standing.why
        result.training = training_standing(v) if self.options.train else None
        self.io.events(
            ev.KernelAccepted,
            kernel_id=kid,
            attempt_id=chosen.attempt_id,
            speedup_vs_eager=v.speedup_vs_eager,
            speedup_vs_compile=v.speedup_vs_compile,
            eager_only=not standing.beats,
            compile_why=standing.why,
        )
