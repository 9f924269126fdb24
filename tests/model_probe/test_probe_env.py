"""The model probe's environment: the prove step runs banked kernels (an LLM's code among them)
with the allowlist a candidate's process gets; the profile step (the user's model alone) with
forge's own."""

from __future__ import annotations

from forge.model_probe.probe import _environment


def test_the_prove_step_gets_no_key_and_the_profile_step_its_own_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-prove-canary-0123456789")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-canary")
    prove = _environment("prove", {"FORGE_BANK": "/tmp/bank.db"})
    assert "OPENAI_API_KEY" not in prove and "AWS_SECRET_ACCESS_KEY" not in prove
    assert prove["FORGE_BANK"] == "/tmp/bank.db" and prove["HOME"] and prove["PATH"]
    profile = _environment("profile", None)
    assert profile["OPENAI_API_KEY"] == "sk-prove-canary-0123456789"
