"""Everything forge does on a GPU, checked and measured by one command, in parts that fit a short loan.

A GPU machine is lent now and then, for a short time (a command may run 10 minutes, a session's
loan about 15), so the suite is split into parts, the most important first, each resumable: a part
writes its result under ``OUT/parts/`` when it ends, a later run skips the parts already done
(``--redo`` runs them again), and a part that works through a list (test files, ops, models) keeps
what it did and continues where it stopped. ``--total-s`` bounds one run: the same command, run
again, continues. Every run rewrites ``OUT/report.md`` and ``OUT/report.json`` from all the parts
done so far, with the GPU, driver, torch and Triton versions, the date, and each part's commit.

The parts (``--list``; ``--part NAME`` runs the named ones only):

1. ``env``: the machine and the versions;
2. ``gpu_tests``: ``pytest -m gpu`` (every GPU test), file by file, with the summary;
3. ``hacks``: the verifier on CUDA against the reward hacks specific to GPUs (work on a side
   stream, CUDA event patching, results kept between calls, lazy outputs, a library call dressed as a
   kernel, precision downgrades), each expected to be refused, and honest Triton and CUDA kernels
   expected to pass;
4. ``optimize``: ``forge optimize`` with the built-in agent on the shipped examples, and per banked
   kernel, in one plain loop: eager, torch.compile (default and max-autotune) and the kernel loaded
   from the bank, checked to run (no fallback) in eval mode;
5. ``runtime``: ``kernelize`` on a model, ``torch.compile(fullgraph=True)`` over it, the dispatch
   overhead, and ``benchmarks.claims.reproduce`` against the bank's claims;
6. ``llm_cuda``: the LLM path's CUDA backend against a scripted OpenAI-compatible server (a
   ``load_inline`` kernel built and verified);
7. ``training``: ``forge optimize --train`` on the shipped training example and some catalog ops,
   each kernel in a training step (ran, gradients equal), and the example's training loop;
8. ``model``: ``forge optimize MODEL --modules`` on the shipped models, the kernelized model proven
   and timed four ways;
9. ``catalog``: the optimize part's table for the op catalog (the longest: last, over several loans).

``--dry-run`` runs the same parts on the CPU: one op each, Triton in its interpreter where a part
uses it, one round; a step that needs CUDA is skipped with the reason. The test suite runs it
(``tests/test_gpu_suite.py``), so the suite does not rot between loans.

Usage: python -m benchmarks.gpu_suite --out DIR [--dry-run] [--part NAME ...] [--redo] [--list]
                                      [--commit SHA] [--part-budget-s S] [--total-s S]
                                      [--copy-to DIR] [--resume-from DIR/suite.tar.gz]
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

from benchmarks.gpu_suite.archive import ARCHIVE, pack, unpack
from benchmarks.gpu_suite.checks import env_part, gpu_tests_part, hacks_part
from benchmarks.gpu_suite.llm_cuda import llm_cuda_part
from benchmarks.gpu_suite.model import model_part
from benchmarks.gpu_suite.optimize import catalog_part, optimize_part, runtime_part
from benchmarks.gpu_suite.part import Context, PartResult
from benchmarks.gpu_suite.training import training_part
from benchmarks.support.paths import ROOT

MIN_PART_S = 120.0  # under --total-s, a part is started only with this much time left

# The parts, the most important first: a loan that ends early has done those.
PARTS: tuple[tuple[str, Callable[[Context], PartResult]], ...] = (
    ("env", env_part),
    ("gpu_tests", gpu_tests_part),
    ("hacks", hacks_part),
    ("optimize", optimize_part),
    ("runtime", runtime_part),
    ("llm_cuda", llm_cuda_part),
    ("training", training_part),
    ("model", model_part),
    ("catalog", catalog_part),
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


def _result_path(out: Path, name: str) -> Path:
    """A part's result, by its name alone: an archive stays readable when parts are added."""
    return out / "parts" / f"{name}.json"


def run_part(name: str, run: Callable[[Context], PartResult], ctx: Context, seconds: float, commit: str) -> PartResult:
    """One part, given ``seconds``, its failure to run recorded as its result (the suite goes on to
    the next). A part that ends (passed, failed, skipped) replaces what it saved on the way; one
    cut short by its budget, or one that raised, keeps it, and the next run continues from there."""
    path = _result_path(ctx.out, name)
    ctx.start_part(path.with_suffix(".partial.json"), seconds)
    t0 = time.monotonic()
    try:
        result = run(ctx)
    except Exception as exc:  # a part that breaks is a finding, not the end of the suite
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]
        result = PartResult(
            name=name, status="error", summary=f"the part raised {type(exc).__name__}: {exc}", notes=[trace]
        )
    result.seconds = round(time.monotonic() - t0, 1)
    result.commit, result.machine = commit, ctx.machine
    path.parent.mkdir(parents=True, exist_ok=True)
    if result.status == "partial":
        ctx.save_partial(result)
    else:
        path.write_text(json.dumps(result.to_json(), indent=1))
        if result.status != "error" and ctx.partial is not None:
            ctx.partial.unlink(missing_ok=True)
    ctx.partial = None
    return result


def _machine(ctx: Context) -> str:
    """The GPU this run's parts run on (a loan's calls may land on different ones)."""
    if ctx.dry:
        return "CPU (dry run)"
    import torch

    return str(torch.cuda.get_device_name(0))


def _done(out: Path) -> list[PartResult]:
    """Each part's latest result: its final one, else what it saved on the way."""
    results = []
    for name, _ in PARTS:
        for path in (_result_path(out, name), _result_path(out, name).with_suffix(".partial.json")):
            if path.is_file():
                results.append(PartResult.from_json(json.loads(path.read_text())))
                break
    return results


def _bring_back(out: Path, to: Path) -> None:
    """Two files into a loan's output folder, which brings back only a few: the report to read, and
    the archive (``--resume-from``) a fresh machine continues from."""
    pack(out, to)
    if (out / "report.md").is_file():
        shutil.copy2(out / "report.md", to / "report.md")


def write_report(out: Path, ctx: Context, commit: str) -> Path:
    """``report.md`` and ``report.json`` from every part done so far."""
    results = _done(out)
    env = next((r for r in results if r.name == "env"), None)
    head = [
        f"# forge's GPU suite{' (dry run: CPU)' if ctx.dry else ''}",
        "",
        f"Generated by `python -m benchmarks.gpu_suite --out {out.name}{' --dry-run' if ctx.dry else ''}` "
        f"on {datetime.date.today()} at commit {commit}.",
        "",
        *(env.notes if env is not None else ["(the env part has not run)"]),
        "",
        "| part | status | seconds | commit | machine | summary |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r.name} | {r.status} | {r.seconds:.0f} | {r.commit or '-'} | {r.machine or '-'} | {r.summary} |"
            for r in results
        ),
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
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gpu_suite", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="where the parts' results and the report go")
    ap.add_argument("--dry-run", action="store_true", help="on the CPU: CUDA steps skipped")
    ap.add_argument("--part", action="append", choices=[name for name, _ in PARTS], help="run only these parts")
    ap.add_argument("--redo", action="store_true", help="run parts again that are done")
    ap.add_argument("--list", action="store_true", help="list the parts and which are done")
    ap.add_argument("--commit", help="the commit the working tree is at (where there is no git)")
    ap.add_argument("--part-budget-s", type=float, default=480.0, help="seconds a part may take")
    ap.add_argument(
        "--total-s",
        type=float,
        help="seconds this run may take (a loan's command: 540): a part gets what is left, none starts "
        f"with under {MIN_PART_S:.0f} s; run the same command again to continue",
    )
    ap.add_argument(
        "--copy-to", type=Path, help=f"after each part, pack the results and banks into DIR/{ARCHIVE} (a loan's $OUT)"
    )
    ap.add_argument("--resume-from", type=Path, help=f"first unpack an earlier run's {ARCHIVE} into --out")
    a = ap.parse_args()
    if a.out is None:
        ap.error("--out DIR is required: where the parts' results and the report go")
    if not a.dry_run and not a.list and not _has_cuda():
        print("gpu_suite: torch sees no CUDA device here; --dry-run runs every part on the CPU", file=sys.stderr)
        return 2
    copy_to = a.copy_to.resolve() if a.copy_to is not None else None
    ctx = Context.make(a.out.resolve(), a.dry_run, a.part_budget_s, copy_to)
    if a.resume_from is not None:
        if not a.resume_from.is_file():
            said = f"gpu_suite: --resume-from {a.resume_from}: no such file (a {ARCHIVE} that --copy-to wrote)"
            print(said, file=sys.stderr)
            return 2
        print(f"resumed {unpack(a.resume_from, ctx.out)} files from {a.resume_from}", flush=True)
    commit = _commit(a.commit)
    done = {r.name for r in _done(ctx.out) if r.status not in ("partial", "error")}
    if a.list:
        for index, (name, _) in enumerate(PARTS, 1):
            print(f"{index}. {name}{'  (done)' if name in done else ''}")
        return 0
    ctx.machine = _machine(ctx)
    failed = False
    deadline = time.monotonic() + a.total_s if a.total_s else None
    for index, (name, run) in enumerate(PARTS, 1):
        if (a.part and name not in a.part) or (name in done and not a.redo):
            continue
        seconds = a.part_budget_s
        if deadline is not None:
            left = deadline - time.monotonic()
            if left < MIN_PART_S:
                print(f"stopped before {name}: {left:.0f} s of --total-s left; the same command continues", flush=True)
                break
            seconds = min(seconds, left)
        if a.redo:  # from the start: neither the result nor a partial one's state is kept
            path = _result_path(ctx.out, name)
            path.unlink(missing_ok=True)
            path.with_suffix(".partial.json").unlink(missing_ok=True)
        print(f"[{index}/{len(PARTS)}] {name} ...", flush=True)
        result = run_part(name, run, ctx, seconds, commit)
        print(f"    {result.status} in {result.seconds:.0f} s: {result.summary}", flush=True)
        failed = failed or result.status in ("failed", "error")
        write_report(ctx.out, ctx, commit)  # after each part: a loan cut short keeps a report
        if copy_to is not None:
            _bring_back(ctx.out, copy_to)
    print(f"wrote {write_report(ctx.out, ctx, commit)}")
    if copy_to is not None:
        _bring_back(ctx.out, copy_to)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
