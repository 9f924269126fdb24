"""Confinement of every process that runs candidate code: a scrubbed environment (``environment``)
and Landlock rules on files, network and signals (``policy``, ``landlock``)."""

from forge.core.sandbox.entry import python_argv
from forge.core.sandbox.environment import allowed, scrubbed
from forge.core.sandbox.landlock import abi_version
from forge.core.sandbox.pid_namespace import pid_namespace_available
from forge.core.sandbox.policy import POLICY_ENV, SandboxError, SandboxPolicy, enter, enter_from_env, policy_for

__all__ = [
    "POLICY_ENV",
    "SandboxError",
    "SandboxPolicy",
    "abi_version",
    "allowed",
    "enter",
    "enter_from_env",
    "pid_namespace_available",
    "policy_for",
    "python_argv",
    "scrubbed",
]
