"""F1: what each key does, on every screen."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]forge tui[/b]: live optimization sessions and the kernel bank, on the same engine as `forge optimize`.

[b]Everywhere[/b]
  F1        this help                 ctrl+p    command palette (every action)
  s         sessions                  b         kernel bank
  d         doctor (this machine)     n         new session
  q         quit (asks first while a session started here runs)
  escape    back

[b]Sessions[/b]
  enter     open the session          r         resume an interrupted session
  /         filter by op or status

[b]A session[/b]
  ↑ ↓       pick an attempt; the tabs show its source, diff, verdict, judge, prompt/reply
  1 … 5     switch to those tabs
  x         stop it (as Ctrl-C in the CLI: interrupted, resumable)
  c         continue it with more rounds
  k         bank the selected passed attempt (timed again first, as finalists are)

[b]Bank[/b]
  /         filter (op, backend, device, confirmed)
  v         re-verify on this machine   e   export its op's kernels to a bank file
  delete    remove (asks first)

Sessions started elsewhere (another terminal's `forge optimize`) appear and update here too.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f1,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield Static(HELP)
