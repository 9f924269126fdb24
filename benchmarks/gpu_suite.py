"""Everything forge does on a GPU, checked and measured by one command, in parts that fit a short loan.

A GPU machine is lent now and then, for a short time (a command may run 10 minutes, a session
about 30), so the suite is split into parts, the most important first, each resumable: a part
writes its result under ``OUT/parts/`` when it ends, a later run skips the parts already done
(``--redo`` runs them again), and a part that works through a list of ops keeps what it did and
continues where it stopped. Every run rewrites ``OUT/report.md`` and ``OUT/report.json`` from all
the parts done so far, with the GPU, driver, torch and Triton versions, the commit and the date.

The parts (``--list``; ``--part NAME`` runs the named ones only):

1. ``env``: the machine and the versions;
2. ``gpu_tests``: ``pytest -m gpu`` (every GPU test), with its summary;
3. ``hacks``: the verifier on CUDA against the reward hacks specific to GPUs (work on a side
   stream, CUDA event patching, results kept between calls, lazy outputs, a library call dressed as a
   kernel, precision downgrades), each expected to be refused, and honest Triton and CUDA kernels
   expected to pass;
4. ``optimize``: ``forge optimize`` with the built-in agent on the shipped examples and the op
   catalog, and per banked kernel, in one plain loop: eager, torch.compile (default and
   max-autotune) and the kernel loaded from the bank, checked to run (no fallback) in eval mode;
5. ``runtime``: ``kernelize`` on a model, ``torch.compile(fullgraph=True)`` over it, the dispatch
   overhead, and ``benchmarks/reproduce.py`` against the bank's claims;
6. ``llm_cuda``: the LLM path's CUDA backend against a scripted OpenAI-compatible server (a
   ``load_inline`` kernel built and verified);
7. ``model``: the model-level run on the shipped models (skipped until it exists).

``--dry-run`` runs the same parts on the CPU: two shipped examples, Triton in its interpreter where a part
uses it, two rounds; a step that needs CUDA is skipped with the reason. The test suite runs it
(``tests/test_gpu_suite.py``), so the suite does not rot between loans.

Usage: python benchmarks/gpu_suite.py --out DIR [--dry-run] [--part NAME ...] [--redo] [--list]
                                      [--commit SHA] [--part-budget-s S] [--copy-to DIR]
On the lent machine forge's own dependencies may be missing: see docs/gpu-suite.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

from gpu_suite_checks import env_part, gpu_tests_part, hacks_part  # noqa: E402
from gpu_suite_core import Context, PartResult  # noqa: E402
from gpu_suite_llm import llm_cuda_part, model_part  # noqa: E402
from gpu_suite_optimize import optimize_part, runtime_part  # noqa: E402

# The parts, the most important first: a loan that ends early has done those.
PARTS: tuple[tuple[str, Callable[[Context], PartResult]], ...] = (
    ("env", env_part),
    ("gpu_tests", gpu_tests_part),
    ("hacks", hacks_part),
    ("optimize", optimize_part),
    ("runtime", runtime_part),
    ("llm_cuda", llm_cuda_part),
    ("model", model_part),
)


def _commit(given: str | None) -> str:
    if given:
        return given
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    except OSError:
        return "unknown (no git here: pass --commit)"
    sha = done.stdout.strip()
    return (sha + (" (with uncommitted changes)" if dirty.strip() else "")) if sha else "unknown (pass --commit)"


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _result_path(out: Path, index: int, name: str) -> Path:
    return out / "parts" / f"{index:02d}_{name}.json"


def run_part(name: str, run: Callable[[Context], PartResult], ctx: Context, path: Path) -> PartResult:
    """One part, its failure to run recorded as its result (the suite goes on to the next). A part
    that ends (passed, failed, skipped) replaces what it saved on the way; one cut short by its
    budget, or one that raised, keeps it, and the next run continues from there."""
    ctx.partial = path.with_suffix(".partial.json")
    t0 = time.monotonic()
    try:
        result = run(ctx)
    except Exception as exc:  # a part that breaks is a finding, not the end of the suite
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]
        result = PartResult(
            name=name, status="error", summary=f"the part raised {type(exc).__name__}: {exc}", notes=[trace]
        )
    result.seconds = round(time.monotonic() - t0, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    if result.status == "partial":
        ctx.save_partial(result)
    else:
        path.write_text(json.dumps(result.to_json(), indent=1))
        if result.status != "error":
            ctx.partial.unlink(missing_ok=True)
    ctx.partial = None
    return result


def _done(out: Path) -> list[PartResult]:
    """Each part's latest result: its final one, else what it saved on the way."""
    results = []
    for index, (name, _) in enumerate(PARTS, 1):
        for path in (_result_path(out, index, name), _result_path(out, index, name).with_suffix(".partial.json")):
            if path.is_file():
                results.append(PartResult.from_json(json.loads(path.read_text())))
                break
    return results


def copy_results(out: Path, to: Path) -> None:
    """The parts' results, the report and the banks (what a later run continues from) into ``to``:
    a lent machine's output folder."""
    to.mkdir(parents=True, exist_ok=True)
    if (out / "parts").is_dir():
        shutil.copytree(out / "parts", to / "parts", dirs_exist_ok=True)
    for path in [*out.glob("report.*"), *(out / "work").glob("*.db")]:
        (to / path.relative_to(out)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, to / path.relative_to(out))


def write_report(out: Path, ctx: Context, commit: str) -> Path:
    """``report.md`` and ``report.json`` from every part done so far."""
    results = _done(out)
    env = next((r for r in results if r.name == "env"), None)
    head = [
        f"# forge's GPU suite{' (dry run: CPU)' if ctx.dry else ''}",
        "",
        f"Generated by `python benchmarks/gpu_suite.py --out {out.name}{' --dry-run' if ctx.dry else ''}` "
        f"on {datetime.date.today()} at commit {commit}.",
        "",
        *(env.notes if env is not None else ["(the env part has not run)"]),
        "",
        "| part | status | seconds | summary |",
        "|---|---|---|---|",
        *(f"| {r.name} | {r.status} | {r.seconds:.0f} | {r.summary} |" for r in results),
        "",
    ]
    body = [line for r in results if r.name != "env" for line in r.markdown()]
    (out / "report.md").write_text("\n".join(head + body) + "\n")
    data = {
        "commit": commit,
        "date": str(datetime.date.today()),
        "dry_run": ctx.dry,
        "parts": [r.to_json() for r in results],
    }
    (out / "report.json").write_text(json.dumps(data, indent=1))
    return out / "report.md"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="where the parts' results and the report go")
    ap.add_argument("--dry-run", action="store_true", help="on the CPU: CUDA steps skipped")
    ap.add_argument("--part", action="append", choices=[name for name, _ in PARTS], help="run only these parts")
    ap.add_argument("--redo", action="store_true", help="run parts again that are done")
    ap.add_argument("--list", action="store_true", help="list the parts and which are done")
    ap.add_argument("--commit", help="the commit the working tree is at (where there is no git)")
    ap.add_argument("--part-budget-s", type=float, default=480.0, help="seconds a part may take (a loan: 600)")
    ap.add_argument("--copy-to", type=Path, help="after each part, copy the results and banks here (a loan's $OUT)")
    a = ap.parse_args()
    if a.out is None:
        ap.error("--out DIR is required: where the parts' results and the report go")
    if not a.dry_run and not a.list and not _has_cuda():
        print("gpu_suite: torch sees no CUDA device here; --dry-run runs every part on the CPU", file=sys.stderr)
        return 2
    ctx = Context.make(a.out.resolve(), a.dry_run, a.part_budget_s)
    done = {r.name for r in _done(ctx.out) if r.status not in ("partial", "error")}
    if a.list:
        for index, (name, _) in enumerate(PARTS, 1):
            print(f"{index}. {name}{'  (done)' if name in done else ''}")
        return 0
    failed = False
    for index, (name, run) in enumerate(PARTS, 1):
        if (a.part and name not in a.part) or (name in done and not a.redo):
            continue
        if a.redo:  # from the start: neither the result nor a partial one's state is kept
            path = _result_path(ctx.out, index, name)
            path.unlink(missing_ok=True)
            path.with_suffix(".partial.json").unlink(missing_ok=True)
        print(f"[{index}/{len(PARTS)}] {name} ...", flush=True)
        result = run_part(name, run, ctx, _result_path(ctx.out, index, name))
        print(f"    {result.status} in {result.seconds:.0f} s: {result.summary}", flush=True)
        failed = failed or result.status in ("failed", "error")
        write_report(ctx.out, ctx, _commit(a.commit))  # after each part: a loan cut short keeps a report
        if a.copy_to is not None:
            copy_results(ctx.out, a.copy_to.resolve())
    print(f"wrote {write_report(ctx.out, ctx, _commit(a.commit))}")
    if a.copy_to is not None:
        copy_results(ctx.out, a.copy_to.resolve())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
