"""The verifier: decides, in isolated workers, whether a candidate is correct and how fast it is."""

from forge.verifier.machine import resolve_device
from forge.verifier.verdict import STATUSES, Check, Verdict
from forge.verifier.verify import verify

__all__ = ["STATUSES", "Check", "Verdict", "resolve_device", "verify"]
