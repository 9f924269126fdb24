"""The ``forge`` command line: a thin view over the engine (no verification logic here)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from forge.errors import ForgeError
from forge.settings import load_settings

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="forge: verified kernels from PyTorch reference ops."
)
err = Console(stderr=True, highlight=False)
out = Console(highlight=False)


@app.callback()
def _root() -> None:
    """forge: verified kernels from PyTorch reference ops."""


def _fail(exc: ForgeError, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"error": {"kind": type(exc).__name__, "message": exc.message}}))
    err.print(f"[bold red]error:[/] {exc.message}", markup=True, soft_wrap=True)
    raise typer.Exit(exc.exit_code)


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f} ms"


def _x(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}x"


def render_verdict(v: dict[str, Any]) -> None:
    color = "green" if v["passed"] else "red"
    out.print(f"[bold]{v['problem']}[/] ← {v['candidate']}  [{color} bold]{v['status'].upper()}[/]")
    table = Table(show_header=True, header_style="bold")
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for c in v["checks"]:
        mark = "[green]pass[/]" if c["passed"] else ("[red]FAIL[/]" if c["fatal"] else "[yellow]warn[/]")
        detail = c["detail"] if len(c["detail"]) < 600 else c["detail"][:600] + " …"
        table.add_row(c["name"], mark, detail)
    out.print(table)
    if v["reason"]:
        out.print(f"[red]reason:[/] {v['reason']}", soft_wrap=True)
    t = v["timings_ms"]
    if t.get("candidate") is not None:
        out.print(
            f"timings (median): candidate {_ms(t['candidate'])}, eager {_ms(t['eager'])}, "
            f"torch.compile {_ms(t['compile'])}  |  speedup vs eager {_x(v['speedup_vs_eager'])}, "
            f"vs compile {_x(v['speedup_vs_compile'])}"
            + ("" if v["timing_meaningful"] else "  (not meaningful: Triton interpreter)")
        )
    for w in v["warnings"]:
        out.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    if v["candidate_output"].strip():
        out.print("[dim]candidate output (captured):[/]")
        out.print(v["candidate_output"].strip()[-1500:], markup=False, soft_wrap=True)
    out.print(f"[dim]{v['cases']} cases on {v['device']} ({v['threads']} threads), {v['elapsed_s']:.1f} s[/]")


@app.command()
def verify(
    op: Annotated[Path, typer.Argument(help="KernelBench-format op file (the reference)")],
    candidate: Annotated[Path, typer.Argument(help="candidate .py file defining ModelNew")],
    device: Annotated[str | None, typer.Option(help="cpu, cuda or auto")] = None,
    timeout: Annotated[float | None, typer.Option(help="seconds the candidate may take in all")] = None,
    memory_limit: Annotated[int | None, typer.Option(help="MiB each worker process may use")] = None,
    trials: Annotated[
        int | None, typer.Option(min=5, help="timed calls per side, at least 5 (default: about 1 s of calls, 5 to 30)")
    ] = None,
    no_compile_baseline: Annotated[
        bool, typer.Option("--no-compile-baseline", help="skip timing torch.compile of the reference")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print exactly one JSON object on stdout")] = False,
    save: Annotated[bool, typer.Option("--save", help="store a passing candidate in the kernel bank")] = False,
    bank: Annotated[Path | None, typer.Option(help="bank file (default: $FORGE_BANK or the per-user bank)")] = None,
) -> None:
    """Check a candidate kernel against a reference op, in isolation, and time it."""
    from forge.verifier import verify as run_verify

    try:
        settings = load_settings(
            device=device,
            timeout=timeout,
            memory_limit_mb=memory_limit,
            timing_trials=trials,
            compile_baseline=False if no_compile_baseline else None,
        )
        progress = (lambda m: err.print(f"[dim]… {m}[/]")) if sys.stderr.isatty() or not as_json else (lambda m: None)
        verdict = run_verify(op, candidate, settings, progress=progress)
    except ForgeError as exc:
        _fail(exc, as_json)
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None
    data = verdict.to_dict()
    if save and verdict.passed:
        from forge.db.store import save_candidate

        try:
            data["kernel_id"] = save_candidate(bank, op, candidate, data)
        except ForgeError as exc:
            _fail(exc, as_json)
    if as_json:
        print(json.dumps(data))
    else:
        render_verdict(data)
        if "kernel_id" in data:
            out.print(f"saved as kernel {data['kernel_id']} in the bank")
        elif save:
            out.print("not saved: only passing candidates enter the bank")
    raise typer.Exit(0 if verdict.passed else 1)


def main() -> None:
    from forge.cli_bank import bank_app
    from forge.cli_optimize import optimize

    app.command()(optimize)
    app.add_typer(bank_app, name="bank")
    app()


if __name__ == "__main__":
    main()
