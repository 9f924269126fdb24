"""The kernel bank database: SQLAlchemy models, engines and Alembic migrations, and the typed
reads and writes of kernels (``kernels``) and of sessions and their attempts (``sessions``)."""

from forge.db.engine import (
    BankFacts,
    bank_facts,
    head_revision,
    open_bank,
    open_for_writing,
    open_reader,
    session_factory,
)
from forge.db.kernels import (
    BucketConfig,
    KernelDetail,
    KernelSummary,
    Provenance,
    bank_to_import,
    copy_kernels,
    export_bank,
    kernel_detail,
    list_kernels,
    remove_kernel,
    remove_provisional,
    save_kernel,
    set_status,
)
from forge.db.sessions import (
    SessionSummary,
    StoredAttempt,
    StoredSession,
    list_sessions,
    load_session,
    mark_crashed,
)

__all__ = [
    "BankFacts",
    "BucketConfig",
    "KernelDetail",
    "KernelSummary",
    "Provenance",
    "SessionSummary",
    "StoredAttempt",
    "StoredSession",
    "bank_facts",
    "bank_to_import",
    "copy_kernels",
    "export_bank",
    "head_revision",
    "kernel_detail",
    "list_kernels",
    "list_sessions",
    "load_session",
    "mark_crashed",
    "open_bank",
    "open_for_writing",
    "open_reader",
    "remove_kernel",
    "remove_provisional",
    "save_kernel",
    "session_factory",
    "set_status",
]
