"""Load verified kernels from a forge bank into programs, with a safe fallback to the reference,
and apply banked parallel plans (``KernelBank.parallelize``; ``plan_apply``, ``plan_export``)."""

from forge.core.errors import BankError, KernelUnavailableError, UnknownOpError
from forge.kernelbank.loader import KernelBankWarning
from forge.kernelbank.runtime import KernelBank, KernelizeMode, bank_enabled, open
from forge.kernelbank.usage import OpUsage, Watch

__all__ = [
    "BankError",
    "KernelBank",
    "KernelBankWarning",
    "KernelUnavailableError",
    "KernelizeMode",
    "OpUsage",
    "UnknownOpError",
    "Watch",
    "bank_enabled",
    "open",
]
