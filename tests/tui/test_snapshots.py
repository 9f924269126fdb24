"""Each screen at 80x24 and 120x40, on fixed data: the bank an older forge wrote
(tests/data/bank_f089c95.sql, migrated on open), times shown in UTC. Update the pictures after an
intended change with `pytest tests/tui/test_snapshots.py --snapshot-update` and look at them."""

from __future__ import annotations

import time

import pytest
from textual.widgets import Input

import forge.harness
from forge.harness import DoctorReport, Finding
from tests.tui.helpers import make_app

SIZES = [(80, 24), (120, 40)]


@pytest.fixture
def fixed_app(old_bank, fast_settings, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    report = DoctorReport(
        [
            Finding("torch", True, "2.13.0+cpu (CPU only), 2 threads", needed=True),
            Finding("GPUs", None, "none (this torch is a CPU build): kernels are C++ on the CPU", "a GPU machine"),
            Finding("C++ compiler + OpenMP", True, "g++ 12.2.0; OpenMP ran 2 threads", needed=True),
            Finding("LLM keys", None, "none set", "the built-in agent needs none"),
        ]
    )
    monkeypatch.setattr(forge.harness, "doctor", lambda *a, **k: report)
    yield make_app(old_bank, fast_settings)
    time.tzset()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize(
    "keys",
    [(), ("enter", "down"), ("b",), ("d",), ("n",), ("f1",)],
    ids=["sessions", "session", "bank", "doctor", "new-session", "help"],
)
def test_screen(snap_compare, fixed_app, size, keys):  # type: ignore[no-untyped-def]
    async def settle(pilot):  # type: ignore[no-untyped-def]
        await pilot.pause(0.3)
        await pilot.press(*keys)
        for field in pilot.app.screen.query(Input):  # a blinking cursor would be on or off by timing
            field.cursor_blink = False
        await pilot.pause(0.6)

    assert snap_compare(fixed_app, terminal_size=size, run_before=settle)
