"""forge: turn a PyTorch reference op into a faster, verified kernel.

Public names only. Settings load lazily (pydantic is not needed by programs that only use
``forge.kernelbank``), and heavy modules (torch) load when used.
"""

from typing import TYPE_CHECKING, Any

from forge.errors import BankError, CompileError, ForgeError, ProblemError, UsageError

if TYPE_CHECKING:
    from forge.settings import ForgeSettings, load_settings

__version__ = "0.1.0"

__all__ = [
    "BankError",
    "CompileError",
    "ForgeError",
    "ForgeSettings",
    "ProblemError",
    "UsageError",
    "__version__",
    "load_settings",
]


def __getattr__(name: str) -> Any:
    if name in ("ForgeSettings", "load_settings"):
        from forge import settings

        return getattr(settings, name)
    raise AttributeError(f"module 'forge' has no attribute {name!r}")
