"""The engine: every operation a front end needs, as a function, and the events it reports.

- ``optimize``: sessions that search for a faster kernel per op and bank the one that holds up
  (``OptimizeOptions`` in, ``RunResult`` out, ``events`` while it runs);
- ``verify_candidate``: one candidate checked and timed (and saved to the bank when asked);
- the bank: ``bank_list``, ``bank_show``, ``bank_export``, ``bank_import``, ``bank_reverify``,
  ``bank_remove``; the sessions in it: ``session_list``, ``session_show``;
- ``write_report``: an optimize run's JSON and chart.

Inside, a session is a sequence of steps (``steps``, ``confirm``, ``banking``) driven by a search
strategy (``search``), over the verifier service, the agents and the bank.
"""

from forge.db import BucketConfig, KernelDetail, KernelSummary, SessionSummary, StoredAttempt, StoredSession
from forge.harness import events
from forge.harness.bank_ops import (
    Reverified,
    Verification,
    bank_export,
    bank_import,
    bank_list,
    bank_remove,
    bank_reverify,
    bank_show,
    verify_candidate,
)
from forge.harness.options import DEFAULT_ROUNDS, OptimizeOptions
from forge.harness.report import write_report
from forge.harness.run import RunResult, collect_ops, optimize
from forge.harness.session import SessionResult, TracePoint
from forge.harness.session_ops import session_list, session_show

__all__ = [
    "DEFAULT_ROUNDS",
    "BucketConfig",
    "KernelDetail",
    "KernelSummary",
    "OptimizeOptions",
    "Reverified",
    "RunResult",
    "SessionResult",
    "SessionSummary",
    "StoredAttempt",
    "StoredSession",
    "TracePoint",
    "Verification",
    "bank_export",
    "bank_import",
    "bank_list",
    "bank_remove",
    "bank_reverify",
    "bank_show",
    "collect_ops",
    "events",
    "optimize",
    "session_list",
    "session_show",
    "verify_candidate",
    "write_report",
]
