"""The ``forge`` command line: a view over the engine (``forge.harness``); it verifies, searches
and stores nothing itself. ``console`` is its bottom (consoles, errors, number formats); one
module per command group (``verify_cmd``, ``optimize_cmd``, ``bank_cmd``) sits on it; ``app``
assembles them."""

from forge.cli.app import app, main

__all__ = ["app", "main"]
