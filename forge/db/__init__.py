"""The kernel bank database: models, engines, migrations, and the write path."""

from forge.db.engine import head_revision, open_for_writing, session_factory
from forge.db.paths import default_bank_path

__all__ = ["default_bank_path", "head_revision", "open_for_writing", "session_factory"]
