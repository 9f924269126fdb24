"""How ``forge optimize`` and ``forge plan`` show a run as it goes: one line per engine event on
stderr (rounds, verdicts, confirmations, the null control, what was banked)."""

from __future__ import annotations

from forge.cli.console import err
from forge.core.statuses import VerdictStatus
from forge.harness import events
from forge.present import fmt_seconds, fmt_times


class EventPrinter:
    """One line per event on stderr: round, attempt verdicts, best so far, tokens and cost."""

    def __init__(self) -> None:
        self.best: dict[str, float] = {}
        self.side_by_side = False  # sessions run at once (a cluster): each attempt's line names its op

    def __call__(self, e: events.Event) -> None:
        name = f"[bold]{e.problem}[/]"
        if isinstance(e, events.ModelStage):
            err.print(f"{name}: {e.stage}: {e.detail}", soft_wrap=True)
        elif isinstance(e, events.ClusterJoined):
            self.side_by_side = True
            ask = f"{e.gpus_per_session} GPU" if e.device == "cuda" else f"{e.cpus_per_session} CPU"
            err.print(
                f"ray ({e.address}): {e.nodes} node{'s' if e.nodes != 1 else ''}, {e.device}; each session "
                f"asks for {ask}, {e.sessions_at_once} at once"
            )
        elif isinstance(e, events.SessionStarted):
            what = f"{e.agent} agent" + (f" ({e.model})" if e.model else "")
            verb = "resuming" if e.resumed else "session"
            parts = ([fmt_seconds(e.share_s)] if e.share_s is not None else []) + (
                [f"${e.share_usd:.4f}"] if e.share_usd is not None else []
            )
            share = f", share {', '.join(parts)}" if parts and e.shared_among > 1 else ""
            node = f" (node {e.node})" if e.node else ""
            err.print(f"{name}: {verb} {e.session_id} — {what}, {e.strategy}, {e.backend} on {e.device}{node}{share}")
        elif isinstance(e, events.SessionSkipped):
            err.print(f"{name}: session {e.session_id} [yellow]left alone[/]: {e.reason}", soft_wrap=True)
        elif isinstance(e, events.RoundStarted):
            best = self.best.get(e.problem)
            err.print(f"{name}: round {e.round}/{e.rounds}" + (f"  best so far {best:.2f}x eager" if best else ""))
        elif isinstance(e, events.CandidateProposed) and e.error:
            err.print(f"  {self._attempt(e)} {e.attempt_id}: [red]no usable candidate[/]: {e.error}", soft_wrap=True)
        elif isinstance(e, events.VerdictReady):
            self._verdict(e)
        elif isinstance(e, events.MachineBusy):
            self._busy(e)
        elif isinstance(e, events.JudgeReviewed):
            if e.error:
                err.print(f"  judge: [yellow]{e.error}[/]", soft_wrap=True)
            elif e.next_step:
                err.print(f"  [dim]judge: {e.next_step}[/]", soft_wrap=True)
        elif isinstance(e, events.CostUpdated):
            cost = "unknown" if e.cost_usd is None else f"${e.cost_usd:.4f}"
            err.print(f"  [dim]tokens {e.tokens}, cost {cost}[/]")
        elif isinstance(e, events.RoundMatched):
            err.print(f"  {e.summary}", soft_wrap=True, markup=False)  # names and errors the candidates wrote
        elif isinstance(e, events.ConfirmStarted):
            err.print(f"{name}: timing attempt {e.attempt_id} again, alone, {e.trials} calls a side")
        elif isinstance(e, events.ConfirmFinished):
            c = f", {e.speedup_vs_compile:.2f}x compile" if e.speedup_vs_compile else ""
            held = f"[green]held[/] {fmt_times(e.speedup_vs_eager)} eager{c}"
            said = held if e.held else f"[yellow]did not hold[/]: {e.reason}"
            err.print(f"  {self._attempt(e)} {e.attempt_id} again: {said}")
        elif isinstance(e, events.NullControlStarted):
            err.print(f"{name}: null control: the reference timed against itself, {e.trials} calls a side")
        elif isinstance(e, events.NullControlFinished):
            if e.median is None or e.low is None or e.high is None or e.bar is None:
                err.print(f"  null control: [yellow]{e.note}[/]", soft_wrap=True)
            else:
                err.print(
                    f"  null control: {e.median:.2f}x ({e.low:.2f}-{e.high:.2f}); a finalist must clear {e.bar:.2f}x"
                )
        elif isinstance(e, events.KernelAccepted):
            only = f"; [yellow]eager only[/]: {e.compile_why}" if e.eager_only else ""
            err.print(
                f"{name}: [green bold]kernel {e.kernel_id} banked[/] ({fmt_times(e.speedup_vs_eager)} eager{only})",
                soft_wrap=True,
            )
        elif isinstance(e, events.SessionFinished) and not e.accepted:
            err.print(f"{name}: [yellow]no kernel accepted[/] ({e.status}): {e.reason}", soft_wrap=True)

    def _attempt(self, e: events.Event) -> str:
        """ "attempt", or with sessions side by side "OP attempt": whose it is."""
        return f"{e.problem} attempt" if self.side_by_side else "attempt"

    def _busy(self, e: events.MachineBusy) -> None:
        if e.waited_s is None:
            err.print(
                f"  [yellow]machine busy[/] ({e.detail}): waiting up to {fmt_seconds(e.limit_s)} for it to "
                "quieten before timing anything more (if it stays, the session ends busy)",
                soft_wrap=True,
            )
        elif e.quiet:
            err.print(f"  machine quiet after {fmt_seconds(e.waited_s)}")
        else:
            err.print(
                f"  [yellow]still busy[/] after {fmt_seconds(e.waited_s)} ({e.detail}): nothing more is timed "
                "under this load; the session ends busy",
                soft_wrap=True,
            )

    def _verdict(self, e: events.VerdictReady) -> None:
        attempt = self._attempt(e)
        if e.status is VerdictStatus.PASSED and e.busy is not None:
            err.print(
                f"  {attempt} {e.attempt_id}: [green]passed[/], [yellow]not timed[/]: the machine was busy ({e.busy})",
                soft_wrap=True,
            )
        elif e.status is VerdictStatus.PASSED:
            s = e.speedup_vs_eager
            if s and s > self.best.get(e.problem, 0.0):
                self.best[e.problem] = s
            c = f", {e.speedup_vs_compile:.2f}x compile" if e.speedup_vs_compile else ""
            err.print(f"  {attempt} {e.attempt_id}: [green]passed[/] {fmt_times(s)} eager{c}")
        else:
            err.print(f"  {attempt} {e.attempt_id}: [red]{e.status}[/] — {e.reason}", soft_wrap=True)
