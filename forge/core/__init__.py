"""forge's base layer: the domain every other package stands on. It imports nothing else from forge.

- ``errors``: the one error hierarchy (every user mistake is a ``ForgeError`` naming the bad input);
- ``settings``: ``ForgeSettings`` and ``load_settings`` (flags > ``FORGE_*`` > config file > defaults);
- ``problem``, ``identity``, ``shapes``: op files (loading, their identity hash, shape variants);
- ``paths``: where the kernel bank lives by default;
- ``importing``: importing a Python file as a module, parsing Python source thread-safely.

Only the light names are re-exported here: the kernel-bank runtime imports this package, and
pydantic (used by ``settings`` and ``problem``) should not load with it.
"""

from forge.core.errors import (
    BankError,
    CandidateFileError,
    CompileError,
    ForgeError,
    KernelUnavailableError,
    ProblemError,
    ProviderError,
    UnknownOpError,
    UsageError,
    WorkerError,
    first_said,
)

__all__ = [
    "BankError",
    "CandidateFileError",
    "CompileError",
    "ForgeError",
    "KernelUnavailableError",
    "ProblemError",
    "ProviderError",
    "UnknownOpError",
    "UsageError",
    "WorkerError",
    "first_said",
]
