"""Redaction of a candidate's text: known secret values, credential shapes, NAME=value lines whose
name looks secret; settings and forge's own words left alone; records redacted field by field."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.core.redaction import Redactor, known_secrets, redacted
from forge.core.statuses import VerdictStatus
from forge.core.verdict import Verdict


@pytest.mark.parametrize(
    "text",
    [
        "OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234",
        "token ghp_abcdefghijklmnopqrstuvwxyz0123",
        "hf_abcdefghijklmnopqrstuvwxyz0123",
        "AKIAABCDEFGHIJKLMNOP",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
        "{'HF_TOKEN': 'not-shaped-but-named'}",
        'DB_PASSWORD="hunter2hunter2"',
    ],
)
def test_credentials_are_replaced_and_counted(text: str):
    r = Redactor()
    out = r.text(text)
    assert "[redacted:" in out and r.replaced >= 1, out
    for secret in ("abcdefghijklmnop", "MIIE", "not-shaped", "hunter2"):
        assert secret not in out


@pytest.mark.parametrize(
    "text",
    [
        "MAX_TOKENS = 4096",
        "BLOCK_KEYS: 1024",
        "session 3: tokens: 123, cache key: abc",
        "max abs error 1.2e-3 at (0, 5); tolerance atol=1e-5",
        "PermissionError: [Errno 13] Permission denied: '/work/project/.env'",
    ],
)
def test_settings_and_forges_words_stay(text: str):
    r = Redactor()
    assert r.text(text) == text and r.replaced == 0


def test_known_values_come_from_the_environment_and_the_projects_dotenv(tmp_path: Path):
    (tmp_path / ".env").write_text("export MODEL_DIR=/data/models\nSERVICE_URL='zq9abcdef0123456789xyz'\nDEBUG=1\n")
    known = known_secrets({"MY_API_KEY": "value-of-my-key", "HOME": "/root"}, [tmp_path])
    assert set(known) == {"value-of-my-key", "zq9abcdef0123456789xyz"}  # a path and a flag are not secrets
    r = Redactor(known)
    assert r.text("got zq9abcdef0123456789xyz and value-of-my-key") == (
        "got [redacted: a secret value forge knows] and [redacted: a secret value forge knows]"
    )


def test_a_verdict_is_redacted_in_every_string_and_keeps_its_enums():
    v = Verdict(problem="op", candidate="c.py", device="cpu", threads=1)
    v.fail(VerdictStatus.RUNTIME_ERROR, "raised: key sk-abcdefghijklmnopqrstuvwx")
    v.candidate_output = "AKIAABCDEFGHIJKLMNOP"
    v.add("run", False, "hf_abcdefghijklmnopqrstuvwxyz0123")
    out, n = redacted(v, {}, [])
    assert n == 3 and out.status is VerdictStatus.RUNTIME_ERROR and not out.passed
    assert "sk-abc" not in out.model_dump_json() and "AKIA" not in out.model_dump_json()
