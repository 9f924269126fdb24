"""``forge optimize``: renders the engine's events on stderr and its result on stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from forge import harness
from forge.cli.console import BankOpt, UnsandboxedOpt, err, out, print_wide, report_and_exit
from forge.cli.event_printer import EventPrinter
from forge.cli.model_optimize import check_model_flags, model_choices, run_model
from forge.cli.model_view import model_summary
from forge.core.choices import SEARCH_STRATEGIES, Backend, Device, Executor, Strategy, search_strategy
from forge.core.errors import UsageError
from forge.core.settings import ForgeSettings, load_settings
from forge.present import fmt_times

MOVED = "became `forge plan MODEL.py`"
STRATEGY_METAVAR = "[" + "|".join(SEARCH_STRATEGIES) + "]"


def parse_strategy(text: str) -> Strategy:
    try:
        return search_strategy(text)
    except UsageError as exc:
        raise typer.BadParameter(exc.message) from exc


def optimize_command(
    ops: Annotated[list[Path] | None, typer.Argument(help="op files, or directories of them")] = None,
    model: Annotated[str | None, typer.Option(help="LLM for the coder, as litellm names it (openai/...)")] = None,
    judge: Annotated[str | None, typer.Option(help="LLM for the judge (default: --model)")] = None,
    api_base: Annotated[str | None, typer.Option(help="base URL of an OpenAI-compatible server")] = None,
    backend: Annotated[Backend, typer.Option(help="auto: Triton on CUDA, C++ on a CPU")] = Backend.AUTO,
    strategy: Annotated[
        Strategy,
        typer.Option(
            parser=parse_strategy, metavar=STRATEGY_METAVAR, help="refine (one trajectory) or evolve (a population)"
        ),
    ] = Strategy.REFINE,
    rounds: Annotated[
        int | None,
        typer.Option(
            "--rounds", "--max-rounds", min=1, help=f"rounds (evolve: generations); default {harness.DEFAULT_ROUNDS}"
        ),
    ] = None,
    best_of: Annotated[
        int,
        typer.Option(
            min=1,
            help="an LLM coder's candidates a reply, verified in its round; the round goes on from the fastest",
        ),
    ] = 2,
    budget_usd: Annotated[float | None, typer.Option(help="stop once the LLM cost reaches this")] = None,
    time_limit: Annotated[float | None, typer.Option(help="stop after this many seconds")] = None,
    workers: Annotated[int, typer.Option(min=1, help="verifications run in parallel")] = 1,
    device: Annotated[Device | None, typer.Option(help="auto takes CUDA where there is a GPU")] = None,
    executor: Annotated[
        Executor | None,
        typer.Option(help="local (this machine, the default) or ray (a Ray cluster: forge-kernels\\[ray])"),
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
    train: Annotated[
        bool,
        typer.Option(
            "--train",
            help="kernels for training too: each candidate's backward is verified against the reference's "
            "autograd, and the bank entry is used where gradients are needed",
        ),
    ] = False,
    no_compile_baseline: Annotated[bool, typer.Option("--no-compile-baseline", help="skip torch.compile")] = False,
    unsandboxed: UnsandboxedOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="print exactly one JSON object on stdout")] = False,
    modules: Annotated[
        bool,
        typer.Option(
            "--modules",
            help="a model (MODEL.py or module:factory): profile it, optimize its hot module classes, prove the "
            "kernelized model end to end",
        ),
    ] = False,
    include: Annotated[
        list[str] | None, typer.Option(metavar="CLASS", help="--modules: optimize this class too (repeat it)")
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option(metavar="CLASS", help="--modules: leave this class out (repeat it)")
    ] = None,
    min_share: Annotated[
        float | None,
        typer.Option(
            min=0.0, max=1.0, help="--modules: leave out classes below this share of the model's time (default 0.03)"
        ),
    ] = None,
    prove_rounds: Annotated[
        int | None,
        typer.Option(min=3, help="--modules: rounds of the model's four-way timing, per cache regime (default 30)"),
    ] = None,
    ops_dir: Annotated[
        Path | None, typer.Option(help="--modules: where the carved op files go (default forge_ops/MODEL)")
    ] = None,
    # `forge optimize --parallel` became `forge plan` in 0.2: the old flag says so and runs nothing
    parallel: Annotated[bool, typer.Option("--parallel", hidden=True, help=MOVED)] = False,
) -> None:
    """Search for a faster verified kernel for each op and bank the best one (a model's parallel
    plan: forge plan)."""
    if parallel:
        raise typer.BadParameter("a model's parallel plan is `forge plan MODEL.py` now (the same options)")
    resume_all, resume_ids = _resume_choice(resume)
    check_model_flags(modules, include, exclude, ops_dir, min_share, prove_rounds, bool(resume_ids or resume_all))

    def settings() -> ForgeSettings:
        return load_settings(
            device=device,
            compile_baseline=False if no_compile_baseline else None,
            sandbox=False if unsandboxed else None,
            executor=executor,
            ray_address=ray_address,
        )

    def options() -> harness.OptimizeOptions:
        return harness.OptimizeOptions(
            model=model,
            judge_model=judge,
            api_base=api_base,
            backend=backend,
            strategy=strategy,
            rounds=rounds,
            best_of=best_of,
            workers=workers,
            bank=bank,
            budget_usd=budget_usd,
            time_limit_s=time_limit,
            resume=resume_ids[0] if resume_ids else None,
            resume_more=tuple(resume_ids[1:]),
            resume_all=resume_all,
            train=train,
        )

    if modules:
        choices = model_choices(include, exclude, ops_dir, min_share, prove_rounds)
        report_and_exit(lambda: run_model(ops, options(), settings(), choices, report), as_json, model_summary)
    report_and_exit(lambda: _run_ops(ops, options(), settings(), report), as_json, _summary)


def _run_ops(
    ops: list[Path] | None, options: harness.OptimizeOptions, settings: ForgeSettings, report: Path | None
) -> harness.RunResult:
    result = harness.optimize(list(ops or []), options, settings, EventPrinter())
    if report is not None:
        written = harness.write_report(report, result)
        err.print(f"report: {', '.join(str(p) for p in written)}")
    return result


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


def _of_bound(r: harness.SessionResult) -> str:
    """The kernel's fraction of its roofline bound, eager's and torch.compile's beside it:
    "34% (eager 12%, compile 20%)"."""
    if r.bound_fraction is None:
        return "—"
    others = [
        f"{who} {f:.0%}"
        for who, f in (("eager", r.eager_bound_fraction), ("compile", r.compile_bound_fraction))
        if f is not None
    ]
    return f"{r.bound_fraction:.0%}" + (f" ({', '.join(others)})" if others else "")


def _summary(run: harness.RunResult) -> None:
    if not run.results and not run.interrupted:
        left = f" ({len(run.skipped)} left alone, above)" if run.skipped else ""
        out.print(f"nothing to resume: no session in this bank was cut short with its driver gone{left}")
        return
    table = Table(show_header=True, header_style="bold")
    for col in ("op", "kernel", "x eager", "x compile", "judged", "of bound", "other regime", "attempts", "session"):
        table.add_column(col, no_wrap=col != "op")
    for r in run.results:
        kernel = f"[green]{r.kernel_id}[/] {r.backend or ''}" if r.accepted else "[red]none[/]"
        other = next(((name, f) for name, f in r.regimes.items() if name != r.regime), None)
        shown = f"{other[0]} {fmt_times(other[1]['eager'])}/{fmt_times(other[1]['compile'])}" if other else "—"
        table.add_row(
            r.problem,
            kernel,
            fmt_times(r.speedup_vs_eager),
            fmt_times(r.speedup_vs_compile) + (" eager only" if r.accepted and r.eager_only else ""),
            r.regime or "—",
            _of_bound(r),
            shown,
            str(r.attempts),
            str(r.session_id),
        )
    # Piped output gets rich's 80 columns, too narrow for this table; a terminal keeps its own width.
    print_wide(table, whole=True)
    for r in run.results:
        if not r.accepted:
            out.print(f"{r.problem}: {r.reason}", soft_wrap=True)
        elif r.training is not None:
            said = "used under autograd" if r.training.used else "not used under autograd"
            out.print(f"{r.problem}: training: {said}: {r.training.why}", soft_wrap=True)
    if run.tokens:
        cost = "unknown (no price for this model)" if run.cost_usd is None else f"${run.cost_usd:.4f}"
        out.print(f"LLM tokens {run.tokens}, cost {cost}")
