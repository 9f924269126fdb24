"""How fast the TUI opens: the first screen on an empty bank, and the sessions, bank and session
screens on a bank holding many attempts.

1. ``forge tui`` cold, in a fresh process: from the process's start to the sessions screen drawn
   (torch and litellm are not imported for it), with no bank yet and with the big bank below (its
   sessions listed). Median and range of ``--repeats`` runs.
2. A bank with ``--sessions`` sessions of ``--attempts`` attempts each (default 200 x 50 = 10,000
   attempts; every attempt carries a real verdict's JSON) and ``--kernels`` kernels: the time to
   open the sessions screen with its rows, the bank screen with its rows, and one session's screen
   with its attempts and the selected attempt's tabs. Measured in process with Textual's headless
   driver (what a terminal adds is drawing, the same for any bank).

Usage: python -m benchmarks.costs.tui_startup [--repeats 5] [--sessions 200] [--attempts 50] [--kernels 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.core.candidate_config import CandidateConfig
from forge.core.problem import read_problem_source
from forge.core.statuses import SessionStatus
from forge.core.verdict import Verdict
from forge.db import open_for_writing, save_kernel
from forge.db.leases import Driver
from forge.db.sessions import add_proposal, finish_attempt, start_session, update_session

OP = ROOT / "examples" / "ops" / "rmsnorm.py"
SOURCE = (ROOT / "examples" / "candidates" / "rmsnorm_cpp.py").read_text()

CHILD = """
import sys, time
t0 = float(sys.argv[1])
from pathlib import Path
from forge.tui import ForgeApp, TuiLaunch
from forge.harness import OptimizeOptions

async def drawn(pilot):
    from forge.tui.widgets import LiveTable
    await pilot.pause()
    while Path(sys.argv[2]).exists() and not pilot.app.screen.query_one(LiveTable).row_count:
        await pilot.pause(0.01)  # a bank with sessions: until its rows are drawn
    print(time.time() - t0, "torch" in sys.modules, "litellm" in sys.modules)
    pilot.app.exit()

ForgeApp(TuiLaunch([], OptimizeOptions(bank=Path(sys.argv[2])))).run(headless=True, size=(80, 24), auto_pilot=drawn)
"""


def first_screen(bank: Path, repeats: int, what: str) -> None:
    times, heavy = [], set()
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, repr(time.time()), str(bank)], capture_output=True, text=True, check=True
        ).stdout.split()
        times.append(float(out[0]))
        heavy |= {name for name, loaded in zip(("torch", "litellm"), out[1:], strict=True) if loaded == "True"}
    loaded = sorted(heavy) or "neither torch nor litellm"
    print(
        f"first screen drawn ({what}), fresh process: median {statistics.median(times):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f}, {repeats} runs); imported: {loaded}"
    )


def verdict_json() -> str:
    stats = {"median_ms": 1.0, "iqr_ms": 0.1, "q1_ms": 0.95, "q3_ms": 1.05, "trials": 30}
    checks = [{"name": f"check_{i}", "passed": True, "detail": "ok " * 20} for i in range(25)]
    v = {
        "status": "passed",
        "speedup_vs_eager": 2.0,
        "speedup_vs_compile": 1.2,
        "checks": checks,
        "timing_stats": {
            "candidate": stats,
            "eager": stats,
            "paired_eager": {"pairs": 30, "median": 2.0, "low": 1.8, "high": 2.2},
        },
    }
    return json.dumps(v)


def big_bank(path: Path, sessions: int, attempts: int, kernels: int) -> None:
    engine = open_for_writing(path)
    spec = read_problem_source(OP)
    gone = Driver("bench-host", 0)  # a driver that finished long ago: the sessions are listed, not run
    leases = [
        start_session(engine, spec, spec.op_hash, None, "refine", "builtin", None, {"rounds": attempts}, gone)
        for _ in range(sessions)
    ]
    facts = {"backend": "cpp", "device": "cpu", "op_hash": spec.op_hash}
    verdict = Verdict.from_json(json.loads(verdict_json()) | facts)
    for _ in range(kernels):
        save_kernel(engine, spec, SOURCE, verdict)
    for lease in leases:
        for r in range(attempts):
            attempt = add_proposal(engine, lease, r, source=SOURCE, backend="cpp", config=CandidateConfig(), note="")
            finish_attempt(engine, lease, attempt, verdict, CandidateConfig())
        update_session(engine, lease, status=SessionStatus.FINISHED, tokens=0, cost_usd=None)
    engine.dispose()


async def open_screens(bank: Path) -> dict[str, float]:
    from forge.harness import OptimizeOptions
    from forge.tui import ForgeApp, TuiLaunch
    from forge.tui.widgets import LiveTable

    took: dict[str, float] = {}
    app = ForgeApp(TuiLaunch([], OptimizeOptions(bank=bank)))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for name, action in (
            ("bank screen", lambda: app.action_show_bank()),
            ("a session's screen", lambda: app.open_session(1)),
            ("back to the sessions screen", lambda: app.action_show_sessions()),
        ):
            t0 = time.perf_counter()
            action()
            await pilot.pause()
            while not app.screen.query(LiveTable) or not app.screen.query_one(LiveTable).row_count:
                await pilot.pause(0.01)
            took[name] = time.perf_counter() - t0
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--attempts", type=int, default=50)
    ap.add_argument("--kernels", type=int, default=100)
    add_page_option(ap)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        first_screen(Path(tmp) / "empty.db", a.repeats, "no bank yet")
        bank = Path(tmp) / "big.db"
        t0 = time.perf_counter()
        big_bank(bank, a.sessions, a.attempts, a.kernels)
        size = bank.stat().st_size / 2**20
        print(
            f"bank: {a.sessions} sessions x {a.attempts} attempts = {a.sessions * a.attempts} attempts, "
            f"{a.kernels} kernels, {size:.0f} MiB (built in {time.perf_counter() - t0:.0f} s)"
        )
        first_screen(bank, a.repeats, "this bank, its sessions listed")
        runs = [asyncio.run(open_screens(bank)) for _ in range(a.repeats)]
        for name in runs[0]:
            values = [r[name] for r in runs]
            print(
                f"{name} with its rows: median {statistics.median(values):.2f} s "
                f"(min {min(values):.2f}, max {max(values):.2f}, {a.repeats} runs)"
            )


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "How fast the TUI opens"))
