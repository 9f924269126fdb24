"""Worker processes never outlive forge: a killed parent takes a looping candidate with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from forge.verifier.processes.worker_process import without_profiler_lines
from tests.conftest import CANDIDATES, OPS

ROOT = Path(__file__).resolve().parents[2]


def _descendant_workers(root: int) -> list[int]:
    """Every verifier process under ``root``: exec'd workers, the worker template and the
    workers it forked (grandchildren of forge)."""
    parents: dict[int, int] = {}
    commands: dict[int, bytes] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            commands[int(d.name)] = (d / "cmdline").read_bytes()
        except OSError:
            continue
        parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        here = frontier.pop()
        for pid, parent in parents.items():
            if parent == here:
                frontier.append(pid)
                if b"forge.verifier." in commands.get(pid, b""):
                    found.append(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_killed_parent_takes_workers_with_it(cache_dir):
    script = (
        "from forge.verifier import verify\n"
        "from forge.core.settings import ForgeSettings\n"
        f"verify({str(OPS / 'small_softmax.py')!r}, {str(CANDIDATES / 'softmax/infinite_loop.py')!r}, "
        f"ForgeSettings(compile_baseline=False, timeout=300, cache_dir={str(cache_dir)!r}))\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    try:
        workers: list[int] = []
        deadline = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = _descendant_workers(parent.pid)
        assert len(workers) >= 2, "workers did not start"
        time.sleep(1)
        workers = _descendant_workers(parent.pid)  # the template's workers may have come after it
        time.sleep(3)  # let the candidate reach its loop
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(w) for w in workers)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_the_profilers_own_lines_are_not_the_candidates_output():
    printed = (
        "candidate says hi\n"
        "USDT:2026-12-06 06:55:55 4209:4209 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
        "USDT:2026-12-06 06:55:55 4209:4209 SyncActivityProfilerHandler.cpp:59] profiler_stop\n"
        "Failed to read process name for pid 18970\n"
        "USDT is in my own line, profiler_start too\n"
    )
    assert without_profiler_lines(printed) == "candidate says hi\nUSDT is in my own line, profiler_start too\n"
