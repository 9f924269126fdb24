"""The TUI's screens: every session, one session live, the kernel bank, a new session's form,
this machine (doctor), and the keys (help)."""

from forge.tui.screens.bank import BankScreen
from forge.tui.screens.doctor import DoctorScreen
from forge.tui.screens.help import HelpScreen
from forge.tui.screens.new_session import NewSessionScreen
from forge.tui.screens.session import SessionScreen
from forge.tui.screens.session_list import SessionListScreen

__all__ = ["BankScreen", "DoctorScreen", "HelpScreen", "NewSessionScreen", "SessionListScreen", "SessionScreen"]
