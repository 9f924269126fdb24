"""Where a bank lives: a SQLite file (the embedded default) or a PostgreSQL server that a team
shares. No SQLAlchemy here: the runtime imports this."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from forge.core.errors import UsageError

# The URL schemes a server bank may be given with; every one is opened with psycopg (version 3).
_SERVER_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


@dataclass(frozen=True)
class BankLocation:
    """A bank file (``path``) or a database server's URL (``url``): exactly one is set."""

    path: Path | None = None
    url: str | None = None

    @classmethod
    def parse(cls, text: str | os.PathLike[str]) -> BankLocation:
        """``postgresql://user@host:port/db`` (or ``sqlite:///file``) or a file path; UsageError
        for a URL of another kind, naming the ones forge reads."""
        raw = os.fspath(text).strip()
        match = _SCHEME.match(raw)
        if match is None:
            return cls(path=Path(raw).expanduser())
        scheme = match.group(1).lower()
        if scheme == "sqlite":
            return cls(path=Path(raw[len("sqlite:///") :]).expanduser())
        if scheme in _SERVER_SCHEMES:
            return cls(url="postgresql+psycopg://" + raw[match.end() :])
        raise UsageError(
            f"bank {raw!r}: forge keeps banks in a SQLite file (a path) or on PostgreSQL "
            f"(postgresql://user@host:port/database), not {scheme!r}"
        )

    @property
    def is_server(self) -> bool:
        return self.url is not None

    def file(self) -> Path:
        """The SQLite file; only for a file bank."""
        assert self.path is not None, "a server bank has no file"
        return self.path

    def sqlalchemy_url(self) -> str:
        return self.url if self.url is not None else f"sqlite:///{self.file()}"

    def libpq_url(self) -> str:
        """The server URL as psycopg takes it (no SQLAlchemy driver suffix)."""
        assert self.url is not None, "a file bank has no server URL"
        return "postgresql://" + self.url.split("://", 1)[1]

    def __str__(self) -> str:
        if self.url is None:
            return str(self.file())
        # a password in the URL is never printed
        return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", self.libpq_url())


def default_bank_path() -> Path:
    """bank.db in the per-user data directory."""
    import platformdirs

    return Path(platformdirs.user_data_dir("forge")) / "bank.db"


def default_bank() -> BankLocation:
    """$FORGE_BANK (a path or a database URL), else bank.db in the per-user data directory."""
    env = os.environ.get("FORGE_BANK")
    if env:
        return BankLocation.parse(env)
    return BankLocation(path=default_bank_path())


# what the Python API takes for a bank: a location, or a path or URL as text
BankLike = BankLocation | str | os.PathLike[str]


def bank_or_default(bank: BankLike | None) -> BankLocation:
    if bank is None:
        return default_bank()
    return bank if isinstance(bank, BankLocation) else BankLocation.parse(bank)
