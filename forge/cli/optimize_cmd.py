"""``forge optimize``: renders the engine's events on stderr and its result on stdout."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

import typer
from rich.table import Table

from forge import harness
from forge.cli.console import BankOpt, err, out, print_wide, run_or_fail
from forge.cli.plan_cmd import plan_summary, print_plan_event
from forge.core.errors import UsageError
from forge.core.exit_codes import ExitCode
from forge.core.settings import load_settings
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
        if isinstance(e, events.ClusterJoined):
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
            err.print(f"{name}: [green bold]kernel {e.kernel_id} banked[/] ({fmt_times(e.speedup_vs_eager)} eager)")
        elif isinstance(e, events.SessionFinished) and not e.accepted:
            err.print(f"{name}: [yellow]no kernel accepted[/] ({e.status}): {e.reason}", soft_wrap=True)

    def _attempt(self, e: events.Event) -> str:
        """ "attempt", or with sessions side by side "OP attempt": whose it is."""
        return f"{e.problem} attempt" if self.side_by_side else "attempt"

    def _busy(self, e: events.MachineBusy) -> None:
        if e.waited_s is None:
            err.print(
                f"  [yellow]machine busy[/] ({e.detail}): waiting up to {fmt_seconds(e.limit_s)} for it to "
                "quieten before the next verification",
                soft_wrap=True,
            )
        elif e.quiet:
            err.print(f"  machine quiet after {fmt_seconds(e.waited_s)}")
        else:
            err.print(
                f"  [yellow]still busy[/] after {fmt_seconds(e.waited_s)} ({e.detail}): going on; a speedup "
                "timed under load is not counted",
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


def optimize_command(
    ops: Annotated[list[Path] | None, typer.Argument(help="op files, or directories of them")] = None,
    model: Annotated[str | None, typer.Option(help="LLM for the coder, as litellm names it (openai/...)")] = None,
    judge: Annotated[str | None, typer.Option(help="LLM for the judge (default: --model)")] = None,
    api_base: Annotated[str | None, typer.Option(help="base URL of an OpenAI-compatible server")] = None,
    backend: Annotated[str, typer.Option(help="auto, triton, cpp or cuda")] = "auto",
    strategy: Annotated[str, typer.Option(help="refine (one trajectory) or evolve (a population)")] = "refine",
    rounds: Annotated[
        int | None, typer.Option("--rounds", "--max-rounds", help="rounds (evolve: generations); default 8")
    ] = None,
    budget_usd: Annotated[float | None, typer.Option(help="stop once the LLM cost reaches this")] = None,
    time_limit: Annotated[float | None, typer.Option(help="stop after this many seconds")] = None,
    workers: Annotated[int, typer.Option(help="verifications run in parallel")] = 1,
    device: Annotated[str | None, typer.Option(help="cpu, cuda or auto")] = None,
    executor: Annotated[
        str | None, typer.Option(help="local (this machine, the default) or ray (a Ray cluster: forge-kernels[ray])")
    ] = None,
    ray_address: Annotated[
        str | None, typer.Option(help="--executor ray: auto, ray://host:port, or none for a Ray of the run's own")
    ] = None,
    bank: BankOpt = None,
    report: Annotated[Path | None, typer.Option(help="write results.json and speedups.png here")] = None,
    resume: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ID|all",
            help="continue a stored session (its id; repeat it for several), or `all`: every session cut short "
            "(a killed or failed run's) that no live driver runs",
        ),
    ] = None,
    no_compile_baseline: Annotated[bool, typer.Option("--no-compile-baseline", help="skip torch.compile")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print exactly one JSON object on stdout")] = False,
    parallel: Annotated[
        bool, typer.Option("--parallel", help="plan how MODEL.py is spread over ranks instead of writing kernels")
    ] = False,
    world_size: Annotated[int | None, typer.Option(help="--parallel: the number of ranks")] = None,
    mesh: Annotated[str | None, typer.Option(help="--parallel: DPxTP, e.g. 2x2 (default: try each)")] = None,
    memory_per_device: Annotated[
        float | None, typer.Option(help="--parallel: GiB a device has; plans over it are refused")
    ] = None,
    train: Annotated[
        bool, typer.Option("--train/--infer", help="--parallel: plan a training step or inference")
    ] = True,
    simulate: Annotated[
        bool, typer.Option("--simulate", help="--parallel: rank plans with the cost model alone (large meshes)")
    ] = False,
) -> None:
    """Search for a faster verified kernel for each op and bank the best one (with --parallel: the
    fastest verified parallel plan for a model)."""
    resume_all, resume_ids = _resume_choice(resume)
    if parallel or world_size is not None or mesh is not None or simulate:
        plan_options = harness.PlanOptions(
            world_size=world_size or 0,
            mesh=mesh,
            memory_per_device_gib=memory_per_device,
            train=train,
            simulate=simulate,
            model=model,
            judge_model=judge,
            api_base=api_base,
            rounds=rounds,
            budget_usd=budget_usd,
            time_limit_s=time_limit,
            bank=bank,
            resume=_one_session(resume_ids, resume_all),
        )
        _optimize_plan(ops or [], plan_options, parallel, device, as_json)

    def run() -> harness.RunResult:
        settings = load_settings(
            device=device,
            compile_baseline=False if no_compile_baseline else None,
            executor=executor,
            ray_address=ray_address,
        )
        options = harness.OptimizeOptions(
            model=model,
            judge_model=judge,
            api_base=api_base,
            backend=backend,
            strategy=strategy,
            rounds=rounds,
            workers=workers,
            bank=bank,
            budget_usd=budget_usd,
            time_limit_s=time_limit,
            resume=resume_ids[0] if resume_ids else None,
            resume_more=tuple(resume_ids[1:]),
            resume_all=resume_all,
        )
        result = harness.optimize(list(ops or []), options, settings, EventPrinter())
        if report is not None:
            written = harness.write_report(report, result)
            err.print(f"report: {', '.join(str(p) for p in written)}")
        return result

    _report(run, as_json, _summary)


def _resume_choice(given: list[str] | None) -> tuple[bool, list[int]]:
    """``--resume`` as given: ``all``, or session ids."""
    given = given or []
    if "all" in given:
        if len(given) > 1:
            raise typer.BadParameter(
                "`all` continues every session cut short: give no ids beside it", param_hint="--resume"
            )
        return True, []
    ids = []
    for value in given:
        if not (value.isascii() and value.isdigit()):
            raise typer.BadParameter(f"{value!r}: give a session id (a number) or `all`", param_hint="--resume")
        ids.append(int(value))
    return False, ids


def _one_session(resume: list[int], resume_all: bool) -> int | None:
    if resume_all or len(resume) > 1:
        raise typer.BadParameter(
            "a parallel-plan session is resumed alone: give one --resume ID", param_hint="--resume"
        )
    return resume[0] if resume else None


class _Outcome(Protocol):
    """What both kinds of run return: a kernel run's ``RunResult``, a plan session's ``PlanResult``."""

    @property
    def exit_code(self) -> int: ...

    def to_json(self) -> dict[str, Any]: ...


Outcome = TypeVar("Outcome", bound=_Outcome)


def _report(run: Callable[[], Outcome], as_json: bool, summary: Callable[[Outcome], None]) -> None:
    """Run the engine, print its result (one JSON object, or the summary) and exit with its code;
    Ctrl-C exits 130."""
    try:
        result = run_or_fail(run, as_json)
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    if as_json:
        print(json.dumps(result.to_json()))
    else:
        summary(result)
    raise typer.Exit(result.exit_code)


def _summary(run: harness.RunResult) -> None:
    if not run.results and not run.interrupted:
        left = f" ({len(run.skipped)} left alone, above)" if run.skipped else ""
        out.print(f"nothing to resume: no session in this bank was cut short with its driver gone{left}")
        return
    table = Table(show_header=True, header_style="bold")
    for col in ("op", "kernel", "x eager", "x compile", "judged", "other regime", "attempts", "session"):
        table.add_column(col, no_wrap=col != "op")
    for r in run.results:
        kernel = f"[green]{r.kernel_id}[/] {r.backend or ''}" if r.accepted else "[red]none[/]"
        other = next(((name, f) for name, f in r.regimes.items() if name != r.regime), None)
        shown = f"{other[0]} {fmt_times(other[1]['eager'])}/{fmt_times(other[1]['compile'])}" if other else "—"
        table.add_row(
            r.problem,
            kernel,
            fmt_times(r.speedup_vs_eager),
            fmt_times(r.speedup_vs_compile),
            r.regime or "—",
            shown,
            str(r.attempts),
            str(r.session_id),
        )
    # Piped output gets rich's 80 columns, too narrow for this table; a terminal keeps its own width.
    print_wide(table)
    for r in run.results:
        if not r.accepted:
            out.print(f"{r.problem}: {r.reason}", soft_wrap=True)
    if run.tokens:
        cost = "unknown (no price for this model)" if run.cost_usd is None else f"${run.cost_usd:.4f}"
        out.print(f"LLM tokens {run.tokens}, cost {cost}")


def _optimize_plan(
    ops: list[Path], options: harness.PlanOptions, parallel: bool, device: str | None, as_json: bool
) -> None:
    printer = EventPrinter()

    def emit(e: events.Event) -> None:
        if not print_plan_event(e):
            printer(e)

    def run() -> harness.PlanResult:
        if not parallel:
            raise UsageError("--world-size, --mesh and --simulate plan a model's ranks: add --parallel")
        if len(ops) > 1 or (ops and ops[0].is_dir()) or (not ops and options.resume is None):
            raise UsageError("--parallel takes one model file (MODEL.py with Model, get_inputs, get_init_inputs)")
        if device not in (None, "cpu", "auto"):
            raise UsageError(f"--device {device}: plans are run on CPU ranks over gloo (NCCL runs are not built yet)")
        return harness.optimize_plan(ops[0] if ops else None, options, load_settings(device="cpu"), emit)

    _report(run, as_json, plan_summary)
