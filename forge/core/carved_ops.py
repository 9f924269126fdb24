"""The names an op file carved from a model (``forge optimize --modules``) declares, and how an
instance of the model stands with a kernel of its op: read by the op loader, the verifier, the
engine and the kernel-bank runtime alike (no imports but the standard library's: the runtime
loads it)."""

from enum import StrEnum

# The instances of the model the op stands for, by their path in it (a list of strings).
INSTANCES = "FORGE_INSTANCES"
# Which of them the op builds. Verifying the op's kernel on another instance loads the op with
# this constant overridden; the runtime builds a kernel's constants for an instance the same way.
INSTANCE = "FORGE_INSTANCE"


class InstanceOutcome(StrEnum):
    """How an instance of a model stands with a kernel of the op carved for it."""

    SEARCHED = "searched"  # the instance the op's search verified and timed the kernel on
    VERIFIED = "verified"  # the kernel verified on it: its own arguments and recorded calls
    SAME = "same"  # built and called exactly as an instance the kernel was verified on (no second run)
    FAILED = "failed"  # the kernel failed on it: the instance gets an op of its own
    # the op cannot stand for it (the model holds it otherwise than its constructor builds it, or it
    # could not be built or checked): no kernel of this op runs on it, and no op of its own is made
    REFUSED = "refused"
    UNCHECKED = "unchecked"  # the run stopped (a limit, Ctrl-C) before the kernel was checked on it

    @property
    def binds(self) -> bool:
        """``kernelize`` may run the kernel on this instance."""
        return self in (InstanceOutcome.SEARCHED, InstanceOutcome.VERIFIED, InstanceOutcome.SAME)


__all__ = ["INSTANCE", "INSTANCES", "InstanceOutcome"]
