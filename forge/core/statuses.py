"""The status vocabularies of verdicts, attempts, sessions and bank entries.

Each is a ``str`` enum: stored in the bank and printed in JSON as its plain value, compared equal
to that value, and read back with ``Status(value)``. Exit codes and acceptance are decided from
these members, never from free strings.
"""

from __future__ import annotations

from enum import StrEnum


class TextEnum(StrEnum):
    """A str enum: it prints as its value (``f"{s}"`` gives "passed", not "VerdictStatus.PASSED")."""


class VerdictStatus(TextEnum):
    """What the verifier decided about one candidate."""

    PASSED = "passed"
    FAILED_CORRECTNESS = "failed_correctness"
    FAILED_INTEGRITY = "failed_integrity"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"


class ModuleMode(TextEnum):
    """The mode an op's module is called in (``nn.Module.training``): the bank's kernels are for
    eval mode; an op whose output differs by mode (BatchNorm) is verified in training mode too."""

    EVAL = "eval"
    TRAIN = "train"


class AttemptRole(TextEnum):
    """Who produced an attempt row: the coder's candidate, the judge's review of one, or a
    finalist's confirmation (timed again before banking)."""

    CODER = "coder"
    JUDGE = "judge"
    CONFIRM = "confirm"
    PLAN = "plan"  # a parallel plan proposed for a model (its evidence in place of a verdict)


class AttemptStatus(TextEnum):
    """An attempt row's status: a verdict's status once verified, else where it stands."""

    PENDING = "pending"  # proposed, not verified yet (a killed session leaves these; resume verifies them)
    INVALID_REPLY = "invalid_reply"  # the coder's reply held no candidate, or the judge's no usable answer
    REVIEWED = "reviewed"  # a judge row with usable feedback
    PASSED = "passed"
    FAILED_CORRECTNESS = "failed_correctness"
    FAILED_INTEGRITY = "failed_integrity"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REFUSED = "refused"  # a plan the static rules or the memory limit refused: never run
    PREDICTED = "predicted"  # a plan ranked by the cost model alone (--simulate): never run

    @classmethod
    def of(cls, verdict: VerdictStatus) -> AttemptStatus:
        return cls(verdict.value)

    @property
    def verified(self) -> bool:
        """The row holds a verdict."""
        return self.value in _VERDICT_VALUES


_VERDICT_VALUES = frozenset(s.value for s in VerdictStatus)


class SessionStatus(TextEnum):
    """How an optimisation session stands or ended."""

    RUNNING = "running"
    FINISHED = "finished"  # rounds spent, or the judge/coder had nothing left to try
    # finished, with candidates that passed but none faster than eager beyond the measured noise
    # (the reason gives eager's roofline fraction and the best candidate's speedup with its spread)
    NO_GAIN = "no_gain"
    BUDGET = "budget"  # --budget-usd reached
    TIME_LIMIT = "time_limit"  # --time-limit reached
    INTERRUPTED = "interrupted"  # Ctrl-C; --resume continues it
    UNSUPPORTED = "unsupported"  # the coder cannot handle this op at all
    PROVIDER_ERROR = "provider_error"  # the LLM provider went away mid-session; --resume continues it
    # a verification (a round's or a finalist's) was timed under a load that was still there after the
    # session's wait for quiet (quiet_wait_s): nothing more was timed or banked; --resume continues it
    BUSY = "busy"
    # a finalist held up but its null control could not be measured (it failed): nothing banked,
    # nothing rejected; --resume confirms again
    UNCONFIRMED = "unconfirmed"
    CRASHED = "crashed"  # forge itself failed mid-session (a bug: see the log); --resume continues it

    @property
    def hit_limit(self) -> bool:
        return self in (SessionStatus.BUDGET, SessionStatus.TIME_LIMIT)

    @property
    def resumable(self) -> bool:
        return self not in (SessionStatus.FINISHED, SessionStatus.NO_GAIN)

    @property
    def cut_short(self) -> bool:
        """Stopped by something other than its own search or its limits (a killed driver, Ctrl-C, a
        failure, a busy machine): what ``--resume all`` continues."""
        return self.resumable and not self.hit_limit and self is not SessionStatus.UNSUPPORTED


class KernelStatus(TextEnum):
    """A bank entry's status: used by the runtime, or found bad by a re-verification."""

    ACTIVE = "active"
    BAD = "bad"


class BindMode(TextEnum):
    """How a bank kernel runs on an existing instance of the user's layer (forge.core.instance_binding)."""

    DIRECT = "direct"  # its forward runs on the instance itself
    VIEW = "view"  # its forward runs on a view: the instance's state plus the kernel's own constants
    NONE = "none"  # it cannot: bank.load still uses it, kernelize does not


class TimingRegime(TextEnum):
    """How the timed calls found the caches (forge.verifier.parent.timing.paired)."""

    COLD = "cold"  # the last-level cache flushed before each call, inputs never used before
    WARM = "warm"  # back-to-back calls on inputs just written (as a model's activations are)
