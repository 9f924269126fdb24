"""forge: turn a PyTorch reference op into a faster, verified kernel.

Public names only; heavy modules (torch) load lazily when these are used.
"""

from forge.errors import CompileError, ForgeError, ProblemError, UsageError
from forge.settings import ForgeSettings, load_settings

__version__ = "0.1.0"

__all__ = [
    "CompileError",
    "ForgeError",
    "ForgeSettings",
    "ProblemError",
    "UsageError",
    "__version__",
    "load_settings",
]
