"""``forge tui``: a Textual front end over the same engine as ``forge optimize``: every session
in the bank (live, including those other processes run), one session's attempts with their
source, diff, verdict and the judge's feedback, the kernel bank and its actions, a new-session
form, and ``forge doctor``. It renders and calls the engine; it never verifies, searches or runs
SQL itself.

Names load on first use: the ``forge`` command registers ``tui_command`` without importing
Textual, so ``forge verify`` does not pay for it.
"""

from typing import TYPE_CHECKING

from forge.core.importing import attributes_on_first_use

if TYPE_CHECKING:
    from forge.tui.app import ForgeApp, TuiLaunch
    from forge.tui.command import tui_command

__all__ = ["ForgeApp", "TuiLaunch", "tui_command"]

_WHERE = {"ForgeApp": "forge.tui.app", "TuiLaunch": "forge.tui.app", "tui_command": "forge.tui.command"}
__getattr__ = attributes_on_first_use(__name__, _WHERE)
