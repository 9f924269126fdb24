"""``forge optimize``: renders the engine's events on stderr and its result on stdout."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from forge import harness
from forge.cli.console import BankOpt, UnsandboxedOpt, err, out, print_wide, report_and_exit
from forge.cli.event_printer import EventPrinter
from forge.cli.model_view import model_summary
from forge.cli.plan_cmd import plan_command
from forge.core.choices import SEARCH_STRATEGIES, Backend, Device, Executor, Strategy, search_strategy
from forge.core.errors import UsageError
from forge.core.settings import ForgeSettings, load_settings
from forge.present import fmt_times

MOVED = "moved to `forge plan MODEL.py`"
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
    # Parallel plans moved to `forge plan`; these still work for a release (hidden from --help)
    parallel: Annotated[bool, typer.Option("--parallel", hidden=True, help=MOVED)] = False,
    world_size: Annotated[int | None, typer.Option(hidden=True, help=MOVED)] = None,
    mesh: Annotated[str | None, typer.Option(hidden=True, help=MOVED)] = None,
    memory_per_device: Annotated[float | None, typer.Option(hidden=True, help=MOVED)] = None,
    infer: Annotated[bool, typer.Option("--infer", hidden=True, help=MOVED)] = False,
    simulate: Annotated[bool, typer.Option("--simulate", hidden=True, help=MOVED)] = False,
) -> None:
    """Search for a faster verified kernel for each op and bank the best one (a model's parallel
    plan: forge plan)."""
    resume_all, resume_ids = _resume_choice(resume)
    if parallel or world_size is not None or mesh is not None or simulate:
        if not parallel:
            raise typer.BadParameter("--world-size, --mesh and --simulate plan a model's ranks: use forge plan")
        _moved_to_plan(
            ops or [],
            device,
            world_size=world_size,
            mesh=mesh,
            memory_per_device=memory_per_device,
            train=not infer,
            simulate=simulate,
            model=model,
            judge=judge,
            api_base=api_base,
            rounds=rounds,
            budget_usd=budget_usd,
            time_limit=time_limit,
            bank=bank,
            resume=_one_session(resume_ids, resume_all),
            as_json=as_json,
        )
    if not modules and (include or exclude or ops_dir is not None or min_share is not None or prove_rounds):
        raise typer.BadParameter(
            "--include, --exclude, --min-share, --prove-rounds and --ops-dir are for a model: add --modules"
        )
    if modules and (resume_ids or resume_all):
        raise typer.BadParameter(
            "a model-level run starts afresh: resume its ops' sessions by id", param_hint="--resume"
        )

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
        choices = _model_choices(include, exclude, ops_dir, min_share, prove_rounds)
        report_and_exit(lambda: _run_model(ops, options(), settings(), choices, report), as_json, model_summary)
    report_and_exit(lambda: _run_ops(ops, options(), settings(), report), as_json, _summary)


def _moved_to_plan(ops: list[Path], device: Device | None, **plan: Any) -> None:
    """``forge optimize --parallel``: said to have moved, then run as ``forge plan`` (exits)."""
    err.print(
        "[yellow]note:[/] `forge optimize --parallel` has moved to `forge plan MODEL.py` (the same options); "
        "this form goes in the next release",
        soft_wrap=True,
    )
    if device not in (None, Device.CPU, Device.AUTO):
        raise typer.BadParameter(f"{device}: plans are run on CPU ranks over gloo", param_hint="--device")
    plan_command(_one_model(ops), **plan)


def _model_choices(
    include: list[str] | None,
    exclude: list[str] | None,
    ops_dir: Path | None,
    min_share: float | None,
    prove_rounds: int | None,
) -> harness.ModelChoices:
    choices = harness.ModelChoices(include=frozenset(include or ()), exclude=frozenset(exclude or ()), ops_dir=ops_dir)
    if min_share is not None:
        choices = dataclasses.replace(choices, min_share=min_share)
    if prove_rounds is not None:
        choices = dataclasses.replace(choices, prove_rounds=prove_rounds)
    return choices


def _run_ops(
    ops: list[Path] | None, options: harness.OptimizeOptions, settings: ForgeSettings, report: Path | None
) -> harness.RunResult:
    result = harness.optimize(list(ops or []), options, settings, EventPrinter())
    if report is not None:
        written = harness.write_report(report, result)
        err.print(f"report: {', '.join(str(p) for p in written)}")
    return result


def _run_model(
    ops: list[Path] | None,
    options: harness.OptimizeOptions,
    settings: ForgeSettings,
    choices: harness.ModelChoices,
    report: Path | None,
) -> harness.ModelRunResult:
    if not ops or len(ops) > 1:
        raise UsageError("--modules takes one model: MODEL.py (Model, get_inputs, get_init_inputs) or module:factory")
    result = harness.optimize_model(str(ops[0]), options, settings, choices, EventPrinter())
    if report is not None:
        written = harness.write_model_report(report, result)
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


def _one_session(resume: list[int], resume_all: bool) -> int | None:
    if resume_all or len(resume) > 1:
        raise typer.BadParameter(
            "a parallel-plan session is resumed alone: give one --resume ID", param_hint="--resume"
        )
    return resume[0] if resume else None


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
            fmt_times(r.speedup_vs_compile) + (" eager only" if r.accepted and r.eager_only else ""),
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
        elif r.training is not None:
            said = "used under autograd" if r.training.used else "not used under autograd"
            out.print(f"{r.problem}: training: {said}: {r.training.why}", soft_wrap=True)
    if run.tokens:
        cost = "unknown (no price for this model)" if run.cost_usd is None else f"${run.cost_usd:.4f}"
        out.print(f"LLM tokens {run.tokens}, cost {cost}")


def _one_model(ops: list[Path]) -> Path | None:
    if len(ops) > 1:
        raise typer.BadParameter("forge plan takes one model file (MODEL.py with Model, get_inputs, get_init_inputs)")
    return ops[0] if ops else None
