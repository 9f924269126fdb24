"""The TUI opens on the bank without importing torch or litellm (seconds each): its first screen
reads the bank only. An import that drags them in (a type hint, a version string, a record kept
beside the machine probes) shows up here, not as a slow start nobody measures."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from forge.harness import Finding, KernelSummary, OptimizeOptions, SessionSummary, StoredAttempt
from forge.tui import ForgeApp, TuiLaunch
import forge.present, forge.tui.screens
print(sorted(m for m in ("torch", "litellm", "forge.verifier") if m in sys.modules))
"""


def test_the_tuis_modules_load_without_torch_litellm_or_the_verifier():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
