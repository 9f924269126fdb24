"""forge: turn a PyTorch reference op into a faster, verified kernel.

The public API:

- ``verify(op, candidate, settings=None) -> Verdict``: check and time one candidate in isolation;
- ``optimize(ops, OptimizeOptions(...), settings=None) -> RunResult``: search for faster kernels
  and bank the ones that hold up;
- ``kernelbank.open(path)``: load banked kernels into a program (``forge.kernelbank``);
- ``ForgeSettings`` / ``load_settings``, ``Verdict``, and the errors (``ForgeError`` and its kinds).

The errors load with the package; every other name loads on first use, so that a program that
only imports ``forge.kernelbank`` does not load the engine (pydantic, SQLAlchemy, the agents).
"""

from typing import TYPE_CHECKING

from forge.core.errors import (
    BankError,
    CompileError,
    ForgeError,
    KernelUnavailableError,
    ProblemError,
    ProviderError,
    UnknownOpError,
    UsageError,
)
from forge.core.importing import attributes_on_first_use
from forge.core.version import VERSION

if TYPE_CHECKING:
    from forge import kernelbank
    from forge.core.settings import ForgeSettings, load_settings
    from forge.core.verdict import Verdict
    from forge.harness import OptimizeOptions, RunResult, optimize
    from forge.verifier import verify

__version__ = VERSION

# name -> the module that defines it (attribute of the same name), or the submodule itself
_ON_FIRST_USE = {
    "ForgeSettings": "forge.core.settings",
    "load_settings": "forge.core.settings",
    "Verdict": "forge.core.verdict",
    "OptimizeOptions": "forge.harness",
    "RunResult": "forge.harness",
    "optimize": "forge.harness",
    "verify": "forge.verifier",
    "kernelbank": "forge.kernelbank",
}

__all__ = [
    "BankError",
    "CompileError",
    "ForgeError",
    "ForgeSettings",
    "KernelUnavailableError",
    "OptimizeOptions",
    "ProblemError",
    "ProviderError",
    "RunResult",
    "UnknownOpError",
    "UsageError",
    "Verdict",
    "__version__",
    "kernelbank",
    "load_settings",
    "optimize",
    "verify",
]

__getattr__ = attributes_on_first_use(__name__, _ON_FIRST_USE)
