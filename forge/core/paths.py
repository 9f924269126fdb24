"""Where the bank lives by default (no SQLAlchemy: the runtime imports this)."""

from __future__ import annotations

import os
from pathlib import Path


def default_bank_path() -> Path:
    """$FORGE_BANK, else bank.db in the per-user data directory."""
    env = os.environ.get("FORGE_BANK")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("forge")) / "bank.db"
