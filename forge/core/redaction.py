"""Credentials taken out of untrusted text before it is stored or shown.

What a candidate prints, raises or leaves in a failing check's detail is the candidate's text: it
lands in the verdict, the bank's evidence, the TUI and the next prompt (to an LLM provider). The
sandbox keeps keys out of the candidate's reach; this is the layer behind it, for a key that got
there anyway. A ``Redactor`` replaces:

- every value the parent knows to be secret: its environment's variables with secret-looking
  names, and the values of the ``.env`` files in the user's project folders;
- anything shaped like a credential: provider keys (``sk-...``), GitHub, Hugging Face, Slack and
  AWS tokens, PEM private keys, and the value of a ``NAME=value`` line whose name looks secret.

Each is replaced by ``[redacted: <what>]``, so a reader sees that something was taken out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|DSN", re.IGNORECASE)
MIN_KNOWN = 8  # a known value shorter than this is too likely to occur by chance ("true", a port)
_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private key",
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
    ),
    ("API key", re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")),
    ("GitHub token", re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("AWS key id", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
)
# NAME=value, NAME: value or 'NAME': 'value' (a .env line, an environment printed), the name an
# environment variable's (capitals) and secret-looking; the value (quoted or not) is what goes
_ASSIGNED = re.compile(
    r"(?P<name>\b[A-Z][A-Z0-9_]*)(?P<sep>[\"']?\s*[=:]\s*)(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;}]+)"
)
_TOKEN_LIKE = re.compile(r"(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9_\-+=.:]{16,}")
_NUMBER = re.compile(r"[-+]?[0-9][0-9_.eE+-]*")
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")

M = TypeVar("M", bound=BaseModel)


@dataclass
class Redactor:
    """Replaces known secret values and credential-shaped text; counts what it replaced."""

    known: list[str] = field(default_factory=list)
    replaced: int = 0

    def __post_init__(self) -> None:
        # longest first: a value that holds another is replaced whole
        self.known = sorted({k for k in self.known if len(k) >= MIN_KNOWN}, key=len, reverse=True)

    def text(self, text: str) -> str:
        for value in self.known:
            if value in text:
                self.replaced += text.count(value)
                text = text.replace(value, "[redacted: a secret value forge knows]")
        for what, shape in _SHAPES:
            text, n = shape.subn(f"[redacted: {what}]", text)
            self.replaced += n
        return _ASSIGNED.sub(self._assigned, text)

    def _assigned(self, m: re.Match[str]) -> str:
        value = m.group("value")
        bare = value.strip("\"'")
        # a number is a setting (MAX_TOKENS = 4096, BLOCK_KEYS: 1024), not a credential
        if (
            not SECRET_NAME.search(m.group("name"))
            or value.startswith("[redacted")
            or len(bare) < 4
            or _NUMBER.fullmatch(bare)
        ):
            return m.group(0)
        self.replaced += 1
        return f"{m.group('name')}{m.group('sep')}[redacted: a value named like a secret]"

    def model(self, record: M) -> M:
        """``record`` with every string in it (fields, lists, dicts, nested records) redacted."""
        update = {name: self._value(getattr(record, name)) for name in type(record).model_fields}
        return record.model_copy(update=update)

    def _value(self, value: object) -> object:
        if isinstance(value, Enum):  # a str enum is a str: its members stay themselves
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, BaseModel):
            return self.model(value)
        if isinstance(value, list):
            return [self._value(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._value(v) for v in value)
        if isinstance(value, dict):
            return {k: self._value(v) for k, v in value.items()}
        return value


def known_secrets(environ: Mapping[str, str], folders: Iterable[Path]) -> list[str]:
    """The secret values the parent knows: its environment's variables with secret-looking names,
    and in the ``.env`` files (``.env``, ``.env.local``, ...) of ``folders`` the values named so or
    shaped like a token (16 or more letters and digits, no path)."""
    found = [v for k, v in environ.items() if SECRET_NAME.search(k)]
    for folder in folders:
        for path in sorted(folder.glob(".env*")) if folder.is_dir() else []:
            found += _env_file_values(path)
    return found


def _env_file_values(path: Path) -> list[str]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    values = []
    for line in lines:
        m = _ENV_LINE.match(line)
        if m is None or line.lstrip().startswith("#"):
            continue
        value = m.group(2).strip("\"'")
        if SECRET_NAME.search(m.group(1)) or _TOKEN_LIKE.fullmatch(value):
            values.append(value)
    return values


REDACTED_NOTE = "{n} credential-shaped string(s) in the candidate's text were redacted (forge.core.redaction)"


def redacted(record: M, environ: Mapping[str, str], folders: Iterable[Path]) -> tuple[M, int]:
    """``record`` with its strings redacted against what ``environ`` and ``folders`` hold, and how
    many were replaced."""
    redactor = Redactor(known_secrets(environ, folders))
    return redactor.model(record), redactor.replaced
