"""Regenerate the TUI pictures of the README and docs/tui.md from a real run: `forge tui examples/ops/rmsnorm.py`
(built-in agent, 2 rounds, a throwaway bank), driven with Textual's Pilot until the session ends,
then the session screen on its best attempt's verdict, saved as SVG.

Usage: python docs/screenshots.py   (about a minute on a 2-core CPU)
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from forge.core.settings import ForgeSettings
from forge.harness import OptimizeOptions
from forge.tui import ForgeApp, TuiLaunch
from forge.tui.widgets import LiveTable

DOCS = Path(__file__).resolve().parent
OP = DOCS.parent / "examples" / "ops" / "rmsnorm.py"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        options = OptimizeOptions(rounds=2, bank=Path(tmp) / "bank.db")
        app = ForgeApp(TuiLaunch([OP], options, ForgeSettings(compile_baseline=True)))
        async with app.run_test(size=(110, 34)) as pilot:
            end = time.monotonic() + 600
            while (not app.runs.runs or app.runs.running()) and time.monotonic() < end:
                await pilot.pause(0.5)
            await pilot.pause(9)  # let the notifications fade
            app.save_screenshot("tui-sessions.svg", str(DOCS))
            await pilot.press("enter")
            await pilot.pause(1)
            table = app.screen.query_one(LiveTable)
            table.move_cursor(row=0)
            await pilot.press("3")
            await pilot.pause(1)
            app.save_screenshot("tui-session.svg", str(DOCS))
    print(f"wrote {DOCS / 'tui-sessions.svg'} and {DOCS / 'tui-session.svg'}")


if __name__ == "__main__":
    asyncio.run(main())
