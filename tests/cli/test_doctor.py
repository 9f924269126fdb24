"""`forge doctor` through the installed command: it explains this machine, names keys but never
shows their values, says when an --api-base server does not answer, and exits 0 when forge can
run its main job here."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from forge.harness import DoctorReport, Finding


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_doctor_reports_this_machine_and_never_a_keys_value(tmp_path, cache_dir):
    env = {
        **os.environ,
        "FORGE_CACHE_DIR": str(cache_dir),
        "FORGE_BANK": str(tmp_path / "none.db"),
        "OPENAI_API_KEY": "sk-do-not-print-me",
    }
    url = f"http://127.0.0.1:{_free_port()}/v1"
    done = subprocess.run(
        [sys.executable, "-m", "forge", "doctor", "--json", "--api-base", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "sk-do-not-print-me" not in done.stdout + done.stderr
    report = json.loads(done.stdout)
    found = {f["topic"]: f for f in report["findings"]}
    assert report["can_run"] is True
    assert found["torch"]["ok"] and found["torch"]["needed"]
    assert found["C++ compiler + OpenMP"]["ok"] and "OpenMP ran" in found["C++ compiler + OpenMP"]["detail"]
    assert "GB/s" in found["measured figures"]["detail"]
    assert "not created yet" in found["bank"]["detail"]
    assert found["LLM keys"]["detail"] == "set: OPENAI_API_KEY"
    assert found[f"--api-base {url}"]["ok"] is False and "no answer" in found[f"--api-base {url}"]["detail"]

    table = subprocess.run([sys.executable, "-m", "forge", "doctor"], env=env, capture_output=True, text=True)
    assert table.returncode == 0 and "forge can run its main job here" in table.stdout


def test_the_main_job_is_judged_only_on_what_it_needs():
    missing_extra = DoctorReport([Finding("torch", True, "", needed=True), Finding("LLM keys", None, "none")])
    missing_needed = DoctorReport([Finding("torch", True, "", needed=True), Finding("C++", False, "", needed=True)])
    assert missing_extra.can_run and not missing_needed.can_run
