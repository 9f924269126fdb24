"""forge's one error hierarchy.

Every error a user can cause (a bad op file, a bad flag, a missing candidate) is a ``ForgeError``
whose message names the offending input and says what to do. Front ends print the message and
exit with ``exit_code``; they never show a traceback for these.
"""

from __future__ import annotations

from forge.core.exit_codes import ExitCode


class ForgeError(Exception):
    """Base class of every error forge raises on purpose."""

    exit_code: int = ExitCode.USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(ForgeError):
    """A bad command-line argument or option value."""


class ProblemError(ForgeError):
    """The op file (the reference problem) cannot be used as it is."""


class CandidateFileError(UsageError):
    """The candidate path does not name a readable file."""


class CompileError(ForgeError):
    """forge's C++ helper could not compile a source."""

    exit_code = ExitCode.NO_RESULT


class WorkerError(ForgeError):
    """A verification worker broke the protocol in a way forge cannot attribute to the candidate."""

    exit_code = ExitCode.NO_RESULT


class BankError(ForgeError):
    """A kernel bank that cannot be used as asked (missing, newer schema, not a bank, unknown id)."""


class UnknownOpError(BankError, KeyError):
    """The bank has never seen this op."""

    def __str__(self) -> str:
        return self.message


class KernelUnavailableError(BankError):
    """strict=True and the bank could not supply a verified kernel."""


class ProviderError(ForgeError):
    """The LLM provider cannot be used: missing key, unreachable, model refused (exit code 3)."""

    exit_code = ExitCode.PROVIDER


def first_said(exc: BaseException, limit: int | None = None) -> str:
    """The first line of what ``exc`` says (at most ``limit`` characters), or "" when it says nothing."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else ""
