"""The kernel bank database: SQLAlchemy models, engines and Alembic migrations, and the typed
reads and writes of kernels (``kernels``) and of sessions and their attempts (``sessions``)."""

from forge.db.engine import head_revision, open_bank, open_for_writing, session_factory
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
from forge.db.sessions import SessionSummary, StoredAttempt, StoredSession, list_sessions, load_session

__all__ = [
    "BucketConfig",
    "KernelDetail",
    "KernelSummary",
    "Provenance",
    "SessionSummary",
    "StoredAttempt",
    "StoredSession",
    "bank_to_import",
    "copy_kernels",
    "export_bank",
    "head_revision",
    "kernel_detail",
    "list_kernels",
    "list_sessions",
    "load_session",
    "open_bank",
    "open_for_writing",
    "remove_kernel",
    "remove_provisional",
    "save_kernel",
    "session_factory",
    "set_status",
]
