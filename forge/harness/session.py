"""One optimisation session over one op: coder → verifier → judge, recorded as it happens.

The session owns the bank connection (the parent is its only writer), the candidate files, the
verification pool and the acceptance rule; the search strategies (``search.py``) only decide what
to ask the coder next. Every attempt is committed when proposed and again when verified, so a
killed process leaves a consistent bank that ``--resume`` continues from.
"""

from __future__ import annotations

import queue
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.agents.roles import Coder, CoderContext, HistoryItem, Judge, Proposal
from forge.db import sessions as rows
from forge.harness import events as ev
from forge.harness.attempts import history_item, invalid_item, restore_history
from forge.harness.confirm import Contender, confirm_finalists
from forge.harness.limits import Limits, beats_eager
from forge.settings import ForgeSettings


@dataclass
class OptimizeOptions:
    model: str | None = None
    judge_model: str | None = None
    api_base: str | None = None
    backend: str = "auto"  # auto | triton | cpp | cuda
    strategy: str = "refine"  # refine | evolve
    rounds: int = 8
    population: int = 4  # evolve: children per generation
    top_k: int = 2  # evolve: parents per generation
    workers: int = 1
    bank: Path | None = None

    def stored(self, op_path: Path, device: str, backend: str) -> dict[str, Any]:
        """What a resumed session needs to go on the same way."""
        keep = ("model", "judge_model", "api_base", "strategy", "rounds", "population", "top_k", "workers")
        return {**{k: getattr(self, k) for k in keep}, "op_path": str(op_path), "device": device, "backend": backend}


@dataclass
class SessionResult:
    problem: str
    session_id: int
    status: str
    accepted: bool = False
    kernel_id: int | None = None
    backend: str | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    attempts: int = 0
    reason: str | None = None
    tokens: int = 0
    cost_usd: float | None = None
    trace: list[dict[str, Any]] = field(default_factory=list)  # per attempt: round, status, speedups

    def summary(self) -> dict[str, Any]:
        keys = ("problem", "accepted", "kernel_id", "backend", "speedup_vs_eager", "speedup_vs_compile")
        out = {k: getattr(self, k) for k in keys}
        out.update(attempts=self.attempts, session_id=self.session_id, status=self.status)
        out["reason"] = None if self.accepted else self.reason
        return out


def _configs_of(p: Proposal) -> dict[str, Any]:
    """What an attempt records of its proposal's configs: the tuner's full config, its parent's,
    and the config less inert knobs (what is banked)."""
    return {"config": p.config or None, "parent_config": p.parent_config, "kernel_config": p.kernel_config}


class Session:
    """Run with ``run()``; the strategy calls ``context``, ``propose`` and ``evaluate``."""

    def __init__(
        self,
        *,
        op_path: Path,
        spec: Any,  # harness.problem.ProblemSource
        op_hash: str,
        target: str | None,
        device: str,
        backend: str,
        options: OptimizeOptions,
        settings: ForgeSettings,
        limits: Limits,
        engine: Any,
        coder: Coder,
        judge: Judge,
        agent: str,
        device_spec: dict[str, Any],
        emit: ev.Emit = ev.ignore,
        resume_id: int | None = None,
    ) -> None:
        self.op_path, self.spec, self.device, self.backend = op_path, spec, device, backend
        self.options, self.settings, self.limits, self.engine = options, settings, limits, engine
        self.coder, self.judge, self.agent, self.device_spec, self._emit = coder, judge, agent, device_spec, emit
        self.history: list[HistoryItem] = []
        self.best: Contender | None = None  # the fastest that beat eager beyond the noise in its own round
        self.contenders: list[Contender] = []  # every passed attempt faster than eager at the median
        self.rejected: set[int] = set()  # attempts whose confirmation did not hold up
        self.round = 0
        self.tokens, self.cost = 0, 0.0
        self.cost_known = True
        self.trace: list[dict[str, Any]] = []
        self._pending: list[tuple[int, int, str, dict[str, Any]]] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="forge-session-")
        if resume_id is None:
            model = options.model if agent == "llm" else None
            stored = options.stored(op_path, device, backend)
            self.id = rows.start_session(engine, spec, op_hash, target, options.strategy, agent, model, stored)
        else:
            self.id = resume_id
            stored_session = rows.load_session(engine, resume_id)
            rows.reopen_session(engine, resume_id, {"rounds": options.rounds})  # a new --rounds sticks
            self.history, self._pending = restore_history(stored_session)
            self.tokens, self.cost = stored_session.tokens, stored_session.cost_usd or 0.0
            self.round = max((a.round for a in stored_session.attempts), default=0)
            verdicts = {a.id: dict(a.verdict or {}) for a in stored_session.attempts}
            for item in self.history:
                self._note_trace(item)
                self._consider(item.attempt_id, item.source, verdicts.get(item.attempt_id or -1, {}), item.config)
        self.resumed = resume_id is not None

    # -- bookkeeping ----------------------------------------------------------------------------

    def emit(self, event_cls: type[ev.Event], **fields: Any) -> None:
        self._emit(event_cls(problem=self.spec.name, session_id=self.id, **fields))

    def _note_trace(self, item: HistoryItem) -> None:
        self.trace.append(
            {
                "round": item.round,
                "attempt_id": item.attempt_id,
                "status": item.status,
                "speedup": item.speedup_vs_eager,
            }
        )

    def _charge(self, tokens: int, cost: float | None, known: bool) -> None:
        if not tokens and cost is None and known:
            return
        self.tokens += tokens
        self.cost += cost or 0.0
        self.cost_known &= known
        self.limits.charge(tokens, cost, known)
        rows.update_session(self.engine, self.id, tokens=self.tokens, cost_usd=self.cost if self.cost_known else None)
        self.emit(ev.CostUpdated, tokens=self.limits.tokens, cost_usd=self.limits.cost_reported)

    def _consider(self, attempt_id: int | None, source: str, verdict: dict[str, Any], config: Any) -> None:
        """Note a verdict as a contender (and as the round best); what would be banked with it is
        its kernel config (the config less inert knobs) where the attempt recorded one."""
        config = verdict.get("kernel_config") or config
        if attempt_id is None or verdict.get("status") != "passed" or not verdict.get("timing_meaningful", True):
            return
        entry = Contender(attempt_id, source, verdict, dict(config or {}))
        if (verdict.get("speedup_vs_eager") or 0.0) > 1.0:
            self.contenders.append(entry)
        ok, _why = beats_eager(verdict)
        # ranked by speedup vs eager measured in the same run: machine drift between runs cancels out
        if ok and (self.best is None or verdict["speedup_vs_eager"] > self.best.verdict["speedup_vs_eager"]):
            self.best = entry

    # -- the three steps a strategy uses --------------------------------------------------------

    def context(self, parent: HistoryItem | None, want: int = 1) -> CoderContext:
        return CoderContext(
            op_name=self.spec.name,
            op_source=self.spec.source,
            device=self.device,
            backend=self.backend,
            device_spec=self.device_spec,
            history=list(self.history),
            want=want,
            parent=parent,
        )

    def propose(self, ctx: CoderContext) -> tuple[list[tuple[int, Proposal]], str | None]:
        """Ask the coder; record each proposal as an attempt. Returns the verifiable ones and, when
        the coder cannot handle the op at all, the reason (the session stops)."""
        proposals = self.coder.propose(ctx)
        out = []
        for p in proposals:
            self._charge(p.tokens, p.cost_usd, p.cost_known)
            meta = {**_configs_of(p), "note": p.note}
            if p.source is None:
                if p.fatal:
                    return [], p.error or "the coder produced no candidate"
                reason = p.error or "the reply held no candidate"
                aid = rows.add_attempt(
                    self.engine, self.id, self.round, prompt=p.prompt, response=p.response, backend=p.backend,
                    status="invalid_reply", verdict={**meta, "status": "invalid_reply", "reason": reason},
                    tokens=p.tokens, cost_usd=p.cost_usd,
                )  # fmt: skip
                item = invalid_item(self.round, reason, p.response, aid)
                self.history.append(item)
                self._note_trace(item)
                self.emit(ev.CandidateProposed, round=self.round, attempt_id=aid, note=p.note, error=reason)
                continue
            aid = rows.add_attempt(
                self.engine, self.id, self.round, prompt=p.prompt, response=p.response, source=p.source,
                backend=p.backend, verdict=meta, tokens=p.tokens, cost_usd=p.cost_usd,
            )  # fmt: skip
            self.emit(ev.CandidateProposed, round=self.round, attempt_id=aid, note=p.note)
            out.append((aid, p))
        return out, None

    def evaluate(self, batch: list[tuple[int, Proposal]]) -> list[HistoryItem]:
        """Verify a batch (in parallel with --workers), record each verdict, ask the judge."""
        verdicts = self._verify_all([(aid, p.source or "") for aid, p in batch])
        items = []
        for (aid, p), verdict in zip(batch, verdicts, strict=True):
            items.append(self._record(aid, self.round, p.source or "", verdict, _configs_of(p)))
        return items

    def _record(self, aid: int, round: int, source: str, verdict: dict[str, Any], meta: dict[str, Any]) -> HistoryItem:
        """``meta``: the proposal's config, parent_config and kernel_config (what is banked)."""
        config, parent_config = meta.get("config"), meta.get("parent_config")
        verdict = {**verdict, "config": config, "parent_config": parent_config}
        if meta.get("kernel_config") is not None:
            verdict["kernel_config"] = meta["kernel_config"]
        rows.finish_attempt(self.engine, aid, verdict)
        item = history_item(round, source, verdict, config, parent_config, aid)
        self.history.append(item)
        self._note_trace(item)
        self.emit(
            ev.VerdictReady, round=round, attempt_id=aid, status=item.status, reason=item.reason,
            speedup_vs_eager=verdict.get("speedup_vs_eager"), speedup_vs_compile=verdict.get("speedup_vs_compile"),
            timings_ms=dict(verdict.get("timings_ms") or {}),
        )  # fmt: skip
        self._consider(aid, source, verdict, config)
        self._review(item, verdict)
        return item

    def _review(self, item: HistoryItem, verdict: dict[str, Any]) -> None:
        review = self.judge.review(self.context(item), verdict)
        self._charge(review.tokens, review.cost_usd, review.cost_known)
        fb = review.feedback
        rows.add_attempt(
            self.engine, self.id, item.round, role="judge", parent_id=item.attempt_id, prompt=review.prompt,
            response=review.response, status="reviewed" if fb else "invalid_reply",
            verdict={"feedback": fb.model_dump(by_alias=True)} if fb else {"error": review.error},
            tokens=review.tokens, cost_usd=review.cost_usd,
        )  # fmt: skip
        item.feedback = fb
        self.emit(
            ev.JudgeFeedback, round=item.round, attempt_id=item.attempt_id or 0,
            diagnosis=fb.diagnosis if fb else "", bottleneck=fb.bottleneck if fb else "",
            next_step=fb.next_step if fb else "", continue_search=fb.continue_search if fb else True,
            error=None if fb else review.error,
        )  # fmt: skip

    def _verify_all(
        self, jobs: list[tuple[int, str]], trials: int | None = None, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """Verdicts for ``jobs`` (attempt id, source). ``trials``: timed calls per side, one job at a
        time on the whole machine (a finalist's confirmation)."""
        from forge.verifier import verify

        workers = 1 if trials else max(1, min(self.options.workers, len(jobs)))
        settings = self.settings
        if trials:
            settings = settings.model_copy(update={"timing_trials": trials, "timeout": timeout or settings.timeout})
        if workers > 1 and self.device == "cpu":  # parallel timing on one CPU: split the cores
            from forge.verifier.machine import available_cores

            settings = settings.model_copy(update={"threads": max(1, available_cores() // workers)})
        free: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        if workers > 1 and self.device == "cuda" and settings.gpu is None:  # one GPU per worker
            from forge.verifier.machine import gpu_slots, visible_gpus

            for gpu in gpu_slots(workers, visible_gpus()):
                free.put(gpu)
        pinned = not free.empty()

        def one(job: tuple[int, str]) -> dict[str, Any]:
            aid, source = job
            path = Path(self._tmp.name) / f"attempt_{aid}.py"
            path.write_text(source)
            gpu = free.get() if pinned else None  # as many slots as threads: never waits long
            try:
                mine = settings if gpu is None else settings.model_copy(update={"gpu": gpu})
                verdict = verify(self.op_path, path, mine).to_dict()
            finally:
                if gpu is not None:
                    free.put(gpu)
            if self.limits.stop_requested.is_set():  # its workers were ended: the verdict means nothing
                raise KeyboardInterrupt
            return verdict

        if workers == 1:
            return [one(j) for j in jobs]
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="forge-verify")
        try:
            return list(pool.map(one, jobs))
        except KeyboardInterrupt:  # do not wait for the running verifications: end their workers
            from forge.verifier.process import kill_all

            kill_all()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def verify_alone(self, aid: int, source: str, trials: int, timeout: float) -> dict[str, Any]:
        """One verdict with ``trials`` timed calls a side, on the whole machine, within ``timeout``
        seconds (a confirmation)."""
        (verdict,) = self._verify_all([(aid, source)], trials=trials, timeout=timeout)
        return verdict

    def verify_pending(self) -> None:
        """Verify attempts a killed session left unverified (resume)."""
        for aid, round, source, meta in self._pending:
            (verdict,) = self._verify_all([(aid, source)])
            self._record(aid, round, source, verdict, meta)
        self._pending = []

    # -- the end ----------------------------------------------------------------------------------

    def finish(self, status: str, reason: str | None) -> SessionResult:
        """Bank the finalist that holds up when timed again (``confirm.py``) and close. An interrupted
        session banks the fastest that beat eager in its own round, marked unconfirmed."""
        from forge.db.store import remove_provisional, save_verdict

        result = SessionResult(
            self.spec.name, self.id, status, backend=self.backend, tokens=self.tokens,
            cost_usd=round(self.cost, 6) if self.cost_known else None, trace=list(self.trace),
            attempts=len(self.trace),
        )  # fmt: skip
        best, confirmed = self.best, False
        if status != "interrupted":
            try:
                best, reason = confirm_finalists(self, reason)
                confirmed = True
            except KeyboardInterrupt:  # Ctrl-C while confirming: bank what its own round measured
                from forge.verifier.process import kill_all

                kill_all()
                status, reason = "interrupted", "interrupted (Ctrl-C); `--resume` continues the session"
                result.status = status
        if best is not None and best.attempt_id in self.rejected:
            best = None  # its confirmation said no before the Ctrl-C
        if confirmed:  # a Ctrl-C before banked this session's round best unconfirmed: this run decides
            remove_provisional(self.engine, self.id)
        if best is not None:
            prov = {
                "session_id": self.id, "attempt_id": best.attempt_id, "agent": self.agent,
                "model": self.options.model if self.agent == "llm" else None,
                "cost_usd": round(self.cost, 6) if self.cost_known else None, "config": best.config,
            }  # fmt: skip
            evidence = {**best.verdict, "confirmed": confirmed}  # timed again after it was chosen, or not
            kid = save_verdict(self.engine, self.spec, best.source, evidence, prov)
            result.accepted, result.kernel_id = True, kid
            result.speedup_vs_eager = best.verdict.get("speedup_vs_eager")
            result.speedup_vs_compile = best.verdict.get("speedup_vs_compile")
            result.backend = best.verdict.get("backend", self.backend)
            self.emit(
                ev.KernelAccepted, kernel_id=kid, attempt_id=best.attempt_id,
                speedup_vs_eager=result.speedup_vs_eager, speedup_vs_compile=result.speedup_vs_compile,
            )  # fmt: skip
        else:
            result.reason = reason or self._why_none()
        rows.update_session(
            self.engine, self.id, status=status, tokens=self.tokens, cost_usd=self.cost if self.cost_known else None
        )
        self.emit(
            ev.SessionFinished, status=status, accepted=result.accepted, kernel_id=result.kernel_id,
            speedup_vs_eager=result.speedup_vs_eager, speedup_vs_compile=result.speedup_vs_compile,
            attempts=result.attempts, reason=result.reason,
        )  # fmt: skip
        self._tmp.cleanup()
        return result

    def _why_none(self) -> str:
        passed = [h for h in self.history if h.status == "passed"]
        if passed:
            top = max(passed, key=lambda h: h.speedup_vs_eager or 0.0)
            return f"no candidate beat eager beyond the measured noise (best {top.speedup_vs_eager or 0:.2f}x)"
        if self.history:
            last = self.history[-1]
            return f"no candidate passed verification (last: {last.status}: {last.reason})"
        return "no candidate was proposed"
