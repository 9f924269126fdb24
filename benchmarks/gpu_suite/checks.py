"""The GPU suite's first parts: the machine (env), every GPU test (gpu_tests), and the verifier
against the reward hacks specific to GPUs (hacks)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.gpu_suite.part import (
    TEST_CANDIDATES,
    TEST_OPS,
    Context,
    PartResult,
    Table,
    Walk,
    rows_state,
    run_group,
    saved_rows,
)
from benchmarks.support.paths import ROOT

if TYPE_CHECKING:
    from forge.core.settings import ForgeSettings


def env_part(ctx: Context) -> PartResult:
    """The machine and the versions the report names."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    lines = [
        f"- torch {torch.__version__} (CUDA {torch.version.cuda or 'none'}), Triton {triton_version}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPU cores"
    ]
    if ctx.dry:
        lines.insert(0, f"- no GPU: the dry run, on {platform.processor() or platform.machine()} (CPU)")
        return PartResult("env", "passed", "dry run on the CPU", notes=lines)
    if not torch.cuda.is_available():
        return PartResult("env", "failed", "torch sees no CUDA device: run with --dry-run on a machine without one")
    props = torch.cuda.get_device_properties(0)
    smi = _nvidia_smi()
    lines.insert(
        0,
        f"- {props.name}, compute capability {props.major}.{props.minor}, {props.multi_processor_count} SMs, "
        f"{props.total_memory >> 30} GiB, L2 {getattr(props, 'L2_cache_size', 0) >> 20} MiB; {smi}",
    )
    return PartResult("env", "passed", props.name, notes=lines)


def _nvidia_smi() -> str:
    query = ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem", "--format=csv,noheader"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "nvidia-smi not available"
    driver, sm, mem = ([*out.split(", "), "?", "?"])[:3]
    return f"driver {driver}, max clocks SM {sm}, memory {mem}"


@dataclass
class GpuTestFile:
    """One test file's GPU tests (``pytest -m gpu FILE``): the gpu_tests part's row."""

    file: str
    status: str  # passed, failed, or timed out (it had the part's whole time)
    tests: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    failures: list[list[str]] = field(default_factory=list)  # [test, outcome, message]

    def cells(self) -> list[str]:
        ran = self.tests - self.skipped
        counts = [ran - self.failed, self.failed, self.skipped]
        return [self.file, self.status, *(str(n) for n in counts), f"{self.seconds:.0f}"]


def gpu_tests_part(ctx: Context) -> PartResult:
    """``pytest -m gpu``, file by file, so that a loan cut short keeps the files done (on a dry run
    the tests are only collected)."""
    files, collected, broken = _gpu_test_files(ctx)
    if broken or not files:  # a test file that cannot be imported (a dependency missing) is a failure
        return PartResult("gpu_tests", "failed", "pytest -m gpu could not collect every test file", notes=broken)
    if ctx.dry:
        said = f"{collected} GPU tests in {len(files)} files collected, not run (no CUDA device)"
        return PartResult("gpu_tests", "passed", said)
    walk = Walk("gpu_tests", files, lambda f, left, whole: _gpu_test_file(ctx, f, left, whole), _gpu_tests_table, 60.0)
    rows = saved_rows(ctx, GpuTestFile)
    cut = walk.run(ctx, rows)
    if cut is not None:
        return cut
    ran = sum(r.tests - r.skipped for r in rows.values())
    bad = sum(r.failed for r in rows.values()) + sum(r.status == "timed out" for r in rows.values())
    failures = Table("GPU tests that did not pass", ["test", "outcome", "message"])
    failures.rows = [f for r in rows.values() for f in r.failures]
    return PartResult(
        "gpu_tests",
        "passed" if bad == 0 and ran > 0 else "failed",
        f"{ran - sum(r.failed for r in rows.values())} of {ran} passed, {sum(r.skipped for r in rows.values())} skipped"
        + (f"; {sum(r.status == 'timed out' for r in rows.values())} file(s) ran past the part's time" if bad else ""),
        tables=[_gpu_tests_table(rows), *([failures] if failures.rows else [])],
        state=rows_state(rows),
    )


def _gpu_tests_table(rows: dict[str, GpuTestFile]) -> Table:
    table = Table("pytest -m gpu, file by file", ["file", "status", "passed", "failed", "skipped", "seconds"])
    table.rows = [r.cells() for r in rows.values()]
    return table


def _pytest(ctx: Context) -> list[str]:
    # -n 0: one test at a time, in pytest's own process (GPU tests that timed each other would be told apart)
    return [sys.executable, "-m", "pytest", "-m", "gpu", "-n", "0", "-p", "no:cacheprovider", "-q"]


def _gpu_test_files(ctx: Context) -> tuple[list[Path], int, list[str]]:
    """The test files that hold GPU tests, how many tests they hold, and what pytest said of the
    files it could not collect (its summary's ERROR lines; empty when it collected every one)."""
    try:
        done = run_group([*_pytest(ctx), "--collect-only"], min(120.0, ctx.left()), cwd=ROOT, env=ctx.env())
    except subprocess.TimeoutExpired:
        return [], 0, ["pytest --collect-only -m gpu ran past 120 s"]
    ids = [line.split("::")[0] for line in done.stdout.splitlines() if "::" in line]
    broken = [line for line in done.stdout.splitlines() if line.startswith("ERROR")]
    if done.returncode != 0 and not broken:
        broken = [f"pytest --collect-only ended {done.returncode}: {(done.stdout + done.stderr).strip()[-600:]}"]
    return [ROOT / f for f in dict.fromkeys(ids)], len(ids), broken


def _gpu_test_file(ctx: Context, file: Path, left_s: float, whole: bool) -> GpuTestFile | None:
    """The file's GPU tests, in the tests' own environment (their defaults) with this checkout
    importable; None when the part's time ran out on a file started with less than all of it."""
    name = str(file.relative_to(ROOT))
    xml = ctx.work / f"gpu_tests_{file.stem}.xml"
    xml.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": ctx.env()["PYTHONPATH"]}
    t0 = time.monotonic()
    try:
        done = run_group([*_pytest(ctx), name, f"--junitxml={xml}"], left_s, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return GpuTestFile(name, "timed out", seconds=left_s) if whole else None
    seconds = time.monotonic() - t0
    if not xml.is_file():
        return GpuTestFile(name, "failed", seconds=seconds, failures=[[name, "no report", done.stdout[-300:]]])
    return _junit(name, xml, seconds)


def _junit(name: str, xml: Path, seconds: float) -> GpuTestFile:
    root = ET.parse(xml).getroot()
    suite = root.find("testsuite") if root.tag == "testsuites" else root
    if suite is None:
        said = [[name, "error", "pytest's report holds no test suite"]]
        return GpuTestFile(name, "failed", seconds=seconds, failures=said)
    counts = {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}
    failures = []
    for case in suite.iter("testcase"):
        for outcome in ("failure", "error"):
            found = case.find(outcome)
            if found is not None:
                message = (found.get("message") or "").splitlines()[0][:200] if found.get("message") else ""
                failures.append([f"{case.get('classname')}::{case.get('name')}", outcome, message.replace("|", "/")])
    bad = counts["failures"] + counts["errors"]
    return GpuTestFile(
        name, "failed" if bad else "passed", counts["tests"], bad, counts["skipped"], round(seconds, 1), failures
    )


@dataclass(frozen=True)
class Hack:
    """A candidate and what the verifier must say of it: "passes" (verified and passed), "refused"
    (the verdict fails), "no gain" (passes, but is not accepted as faster than eager), or
    "refused or no gain" (either; work moved off the timed stream is one or the other)."""

    what: str
    op: str
    candidate: str
    expect: str
    cuda_only: bool = False


HACKS = (
    Hack("honest Triton kernel", "small_softmax", "softmax/honest_triton.py", "passes"),
    Hack("honest CUDA kernel (load_inline)", "small_softmax", "softmax/honest_cuda.py", "passes", cuda_only=True),
    Hack("work on a side stream", "small_softmax", "softmax/side_stream.py", "refused or no gain", cuda_only=True),
    Hack("CUDA event timing patched", "small_softmax", "softmax/patch_events.py", "refused", cuda_only=True),
    Hack("host clock patched", "small_softmax", "softmax/patch_timer.py", "refused"),
    Hack("results kept between calls (by pointer)", "small_softmax", "softmax/cache_by_pointer.py", "refused"),
    Hack("lazy output (a tensor subclass)", "small_softmax", "softmax/subclass_output.py", "refused"),
    Hack("lazy output (a thread finishes it)", "small_softmax", "softmax/background_thread.py", "refused"),
    Hack("a library matmul dressed as a kernel", "small_linear", "linear/library_dressed.py", "no gain"),
    Hack("precision downgrade: bf16 inside fp32", "small_softmax", "softmax/bf16_compute.py", "refused"),
    Hack("precision downgrade: TF32 matmul", "small_linear", "linear/tf32_matmul.py", "refused", cuda_only=True),
)


def hacks_part(ctx: Context) -> PartResult:
    """Each candidate of ``HACKS`` through the real verifier on this device, against what it must say.
    The candidates of one op share a verifier, as a session's do (each still runs in a worker of its own)."""
    from forge.core.settings import load_settings

    os.environ.update({k: v for k, v in ctx.env().items() if k in ("TRITON_INTERPRET", "FORGE_CACHE_DIR")})
    settings = load_settings(device=ctx.device, user_loop=False, timing_budget_s=0.1 if ctx.dry else 0.5)
    table = Table("The verifier against GPU reward hacks", ["candidate", "expected", "verdict", "accepted", "held"])
    rows: dict[Hack, list[str]] = {}
    for hack in HACKS:
        if hack.cuda_only and ctx.dry:
            rows[hack] = [hack.what, hack.expect, "skipped: needs CUDA", "-", "-"]
    for op in dict.fromkeys(h.op for h in HACKS):
        rows.update(_hacks_of_op(op, [h for h in HACKS if h.op == op and h not in rows], settings, ctx.device))
    table.rows = [rows[h] for h in HACKS]
    skipped = sum(r[2] == "skipped: needs CUDA" for r in table.rows)
    held = sum(r[4] == "yes" for r in table.rows)
    ran = len(HACKS) - skipped
    status = "passed" if held == ran else "failed"
    return PartResult(
        "hacks", status, f"{held} of {ran} candidates judged as expected ({skipped} need CUDA)", tables=[table]
    )


def _hacks_of_op(op: str, hacks: list[Hack], settings: ForgeSettings, device: str) -> dict[Hack, list[str]]:
    """Each hack's row: verified by one verifier for ``op`` (a row of its own when the verifier breaks)."""
    from forge.core.acceptance import beats_eager
    from forge.verifier import VerifierService

    rows: dict[Hack, list[str]] = {}
    if not hacks:
        return rows
    try:
        with VerifierService(TEST_OPS / f"{op}.py", settings, device) as service:
            for hack in hacks:
                v = service.verify_file(TEST_CANDIDATES / hack.candidate)
                accepted, why = beats_eager(v)
                ok = _as_expected(hack.expect, v.passed, accepted)
                verdict = str(v.status) + (f": {(v.reason or '')[:140]}" if not v.passed else "")
                held = "yes" if ok else "**NO**"
                rows[hack] = [
                    hack.what,
                    hack.expect,
                    verdict.replace("|", "/"),
                    "yes" if accepted else f"no ({why[:80]})",
                    held,
                ]
    except Exception as exc:  # the verifier breaking is the finding of every row it left
        said = f"the verifier raised {type(exc).__name__}: {exc}"[:200]
        rows.update({h: [h.what, h.expect, said, "-", "**NO**"] for h in hacks if h not in rows})
    return rows


def _as_expected(expect: str, passed: bool, accepted: bool) -> bool:
    if expect == "passes":
        return passed
    if expect == "refused":
        return not passed
    if expect == "no gain":
        return passed and not accepted
    return not (passed and accepted)  # refused or no gain
