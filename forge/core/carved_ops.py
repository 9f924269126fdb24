"""The names an op file carved from a model (``forge optimize --modules``) declares, read by the
op loader, the verifier and the kernel-bank runtime alike (no imports: the runtime loads it)."""

# The instances of the model the op stands for, by their path in it (a list of strings).
INSTANCES = "FORGE_INSTANCES"
# Which of them the op builds. Verifying the op's kernel on another instance loads the op with
# this constant overridden; the runtime builds a kernel's constants for an instance the same way.
INSTANCE = "FORGE_INSTANCE"

__all__ = ["INSTANCE", "INSTANCES"]
