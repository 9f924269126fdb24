"""The exit codes every ``forge`` command uses, each with what it means (the docs' exit-code page
is generated from ``EXIT_CODE_MEANINGS``)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """A ``forge`` command's exit status."""

    SUCCESS = 0
    NO_RESULT = 1
    USAGE = 2
    PROVIDER = 3
    LIMIT = 4
    BUG = 70  # sysexits' EX_SOFTWARE
    INTERRUPTED = 130


EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.SUCCESS: "the command did what it was asked: every op got a kernel (`optimize`), the candidate "
    "passed (`verify`), forge can run its main job here (`doctor`), every kernel re-verified (`bank verify`), "
    "a kernel banked and the kernelized model's outputs match the original's (`optimize --modules`)",
    ExitCode.NO_RESULT: "it ran, and the result is a no: some op got no kernel (`optimize`: no_gain, all "
    "candidates failed, the built-in agent cannot express the op, the machine stayed busy (status `busy`: the "
    "message gives the load and the `--resume` command); `--modules`: no kernel banked, or the "
    "kernelized model's outputs differ), the candidate failed (`verify`), this "
    "machine cannot run forge's main job (`doctor`), a banked kernel failed re-verification (`bank verify`); "
    "also forge's C++ helper failing to compile its own source, or a worker breaking the protocol",
    ExitCode.USAGE: "a user's input cannot be used: a bad flag or setting, an op or candidate file that is "
    "missing or breaks the contract, a bank that is missing, newer than this forge, or not a bank; "
    "the message names the input and what to do",
    ExitCode.PROVIDER: "the LLM provider cannot be used (a missing key, an unreachable server, a model it "
    "refuses); found before any session starts",
    ExitCode.LIMIT: "`--budget-usd` or `--time-limit` ran out before any kernel (or plan) was accepted",
    ExitCode.BUG: "forge itself failed (a bug, not the user's input): it prints the traceback and a line "
    "asking for a report with it",
    ExitCode.INTERRUPTED: "Ctrl-C: the run stopped cleanly; what it had found is in the bank, and "
    "`forge optimize --resume ID` continues it",
}
