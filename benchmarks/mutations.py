"""Deliberate defects, each applied to a copy of this checkout, and the tests that must catch it
run against the copy: a suite that passes with a defect in place does
not guard what it is named for.

Each defect is one text replacement in forge's code (the script stops, saying so, where the text
it replaces is no longer there, so a defect cannot silently stop applying). Before any defect,
the catching tests run on an unchanged copy and must pass: a defect "caught" by tests that fail
anyway shows nothing. A defect is caught when its tests fail (pytest's exit code 1); any other
exit (an import error, no test collected) is reported as broken, not as caught.

The catching tests run as the README's test command runs them: the default ones with the project's
pytest options (spread over the cores), those marked ``pipeline`` one at a time.

Usage: python -m benchmarks.mutations [--defect NAME ...] [--page docs/benchmarks/mutations.md]
Exit status: 0 when every defect asked for is caught, 1 otherwise.
"""

from __future__ import annotations

import argparse
import enum
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT

_REAL = "tests/cli/test_real_pipeline.py::"
PIPELINE = _REAL + "test_a_session_with_every_check_on_banks_a_kernel_whose_user_loop_a_users_own_loop_reproduces"
MODEL_RUN = _REAL + "test_a_model_run_carves_banks_and_proves_the_class_a_fused_kernel_wins_on"
NULL_JUDGED = "tests/harness/test_search_logic.py::test_a_finalist_inside_its_null_controls_spread_is_refused"


@dataclass(frozen=True)
class Defect:
    name: str
    what: str
    path: str  # the file changed, from the checkout's root
    before: str  # text that occurs exactly once in it
    after: str
    tests: tuple[str, ...]  # default-run tests (the README's command) that must fail with it
    pipeline_tests: tuple[str, ...] = ()  # tests marked pipeline (run alone) that must fail with it


DEFECTS = (
    Defect(
        "inflated_speedup",
        "every paired speedup (verdicts, confirmations, the user loop) reported 1.5x too high",
        "forge/core/pairing.py",
        "    median = ratios[n // 2] if n % 2 else (ratios[n // 2 - 1] + ratios[n // 2]) / 2\n",
        "    median = 1.5 * (ratios[n // 2] if n % 2 else (ratios[n // 2 - 1] + ratios[n // 2]) / 2)\n",
        ("tests/verifier/test_pairing.py",),
        (PIPELINE,),
    ),
    Defect(
        "null_control_skipped",
        "a finalist judged without its null control (the reference timed against itself)",
        "forge/harness/sessions/null_control.py",
        "    judged = with_null_control(finalist, null)\n",
        "    judged = finalist\n",
        (NULL_JUDGED,),
        (PIPELINE,),
    ),
    Defect(
        "fallback_counted_as_kernel",
        "bank.watch() counts a call where the reference ran as a call of the kernel",
        "forge/kernelbank/usage.py",
        "                usage.fallbacks += 1\n",
        "                pass\n",
        ("tests/kernelbank/test_training_kernels.py", "tests/kernelbank/test_runtime.py"),
    ),
    Defect(
        "instance_list_wrong",
        "a carved op's kernel banked without the last instance it was checked on",
        "forge/db/instances.py",
        "        for check in checks:\n",
        "        for check in checks[:-1]:\n",
        ("tests/harness/test_model_instances.py", MODEL_RUN),
    ),
    Defect(
        "compile_floor_ignored",
        "a banked kernel used under torch.compile whether or not it beat torch.compile",
        "forge/bank_schema/records.py",
        '        return self.compile_beats_stored in (1, True, "true", "1")\n',
        "        return True\n",
        ("tests/kernelbank/test_compile_mode.py",),
    ),
)


class Outcome(enum.StrEnum):
    CAUGHT = "caught"
    MISSED = "missed"
    BROKEN = "broken"  # the tests neither passed nor failed (pytest's exit code was neither 0 nor 1)


def copy_checkout(dest: Path) -> Path:
    """The checkout's files as they are now (tracked, and new ones git does not ignore) under ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def apply(defect: Defect, root: Path) -> None:
    path = root / defect.path
    text = path.read_text()
    if text.count(defect.before) != 1:
        raise SystemExit(f"{defect.name}: the text it replaces is not in {defect.path} exactly once; update the defect")
    path.write_text(text.replace(defect.before, defect.after))


def run_tests(root: Path, tests: tuple[str, ...], pipeline: bool) -> int:
    """pytest's exit code for ``tests`` in the copy at ``root`` (its forge first on the path, for
    the worker processes too)."""
    if not tests:
        return 0
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    if pipeline:
        command += ["-n", "0", "-m", "pipeline"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def outcome(code: int) -> Outcome:
    """What pytest's exit code says of a defect: its tests failed (1), passed (0), or neither."""
    return {0: Outcome.MISSED, 1: Outcome.CAUGHT}.get(code, Outcome.BROKEN)


def judged(root: Path, defect: Defect) -> tuple[Outcome, Outcome | None]:
    """The defect's outcome in the default run's tests, and in the pipeline tests' (None: it has
    none there)."""
    default = outcome(run_tests(root, defect.tests, pipeline=False))
    alone = outcome(run_tests(root, defect.pipeline_tests, pipeline=True)) if defect.pipeline_tests else None
    return default, alone


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = [d.name for d in DEFECTS]
    parser.add_argument("--defect", action="append", choices=names, help="only this one (repeat it)")
    add_page_option(parser)
    args = parser.parse_args(argv)
    chosen = [d for d in DEFECTS if not args.defect or d.name in args.defect]
    with tempfile.TemporaryDirectory(prefix="forge-mutations-") as scratch:
        clean = copy_checkout(Path(scratch) / "clean")
        tests = tuple(dict.fromkeys(t for d in chosen for t in d.tests))
        pipeline = tuple(dict.fromkeys(t for d in chosen for t in d.pipeline_tests))
        if run_tests(clean, tests, False) or run_tests(clean, pipeline, True):
            print("the catching tests fail on the unchanged checkout: fix them first, nothing is shown")
            return 1
        print("| defect | what it breaks | default run's tests | outcome | pipeline tests | outcome | seconds |")
        print("|---|---|---|---|---|---|---|")
        caught = 0
        for defect in chosen:
            root = copy_checkout(Path(scratch) / defect.name)
            apply(defect, root)
            start = time.monotonic()
            default, alone = judged(root, defect)
            caught += Outcome.CAUGHT in (default, alone)
            named = _named(defect.tests), _named(defect.pipeline_tests) or "-"
            cells = [
                defect.name,
                defect.what,
                named[0],
                default,
                named[1],
                alone or "-",
                f"{time.monotonic() - start:.0f}",
            ]
            print("| " + " | ".join(map(str, cells)) + " |", flush=True)
            shutil.rmtree(root)
    print(f"\n{caught} of {len(chosen)} defects caught")
    return 0 if caught == len(chosen) else 1


def _named(tests: tuple[str, ...]) -> str:
    return ", ".join(f"`{t.rpartition('::')[2]}`" for t in tests)


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Deliberate defects and the tests that catch them"))
