"""Confinement of every process that runs candidate code: a scrubbed environment (``environment``),
Landlock rules on files, network and signals (``policy``, ``landlock``), a filter refusing new
sockets (``syscall_filter``) and namespaces of the worker's own (``namespaces``)."""

from forge.core.sandbox.entry import python_argv
from forge.core.sandbox.environment import allowed, scrubbed
from forge.core.sandbox.landlock import abi_version
from forge.core.sandbox.namespaces import Namespaces, namespaces_available
from forge.core.sandbox.policy import POLICY_ENV, SandboxError, SandboxPolicy, enter, enter_from_env, policy_for
from forge.core.sandbox.syscall_filter import filter_available

__all__ = [
    "POLICY_ENV",
    "Namespaces",
    "SandboxError",
    "SandboxPolicy",
    "abi_version",
    "allowed",
    "enter",
    "enter_from_env",
    "filter_available",
    "namespaces_available",
    "policy_for",
    "python_argv",
    "scrubbed",
]
