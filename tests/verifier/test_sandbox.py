"""The sandbox of the candidate's worker, by the real verifier: a candidate that reaches for the
user's keys, a secret file, site-packages, the network or another process is refused with the
refusal named, or verifies with nothing leaked; honest kernels still pass."""

from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path

import pytest
import torch

from forge.core import sandbox
from forge.core.sandbox import allowed
from forge.verifier import verify
from tests.conftest import CANDIDATES, OPS, sweep

SOFTMAX = OPS / "small_softmax.py"
FORWARD = """
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)
"""

pytestmark = pytest.mark.skipif(sandbox.abi_version() < 6, reason="needs Landlock ABI 6 (Linux 6.12)")


def _candidate(tmp_path: Path, at_import: str) -> Path:
    """An honest softmax whose module first runs ``at_import``, in a directory of its own."""
    folder = tmp_path / "candidate"
    folder.mkdir(exist_ok=True)
    path = folder / "attempt.py"
    path.write_text("import os, socket, sys, signal\nimport torch\n" + at_import + "\n" + FORWARD)
    return path


def _refused(v, fragment: str) -> None:
    assert not v.passed and v.status == "compile_error", (v.status, v.reason)
    assert "Permission denied" in (v.reason or "") or "not permitted" in (v.reason or ""), v.reason
    assert fragment in (v.reason or ""), v.reason


def test_no_key_token_or_bank_reaches_the_candidate(fast_settings, tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "RAY_ADDRESS"):
        monkeypatch.setenv(name, "sk-leak-me")
    monkeypatch.setenv("FORGE_BANK", "postgresql://forge:hunter2@db/bank")
    leak = "print('ENV:', sorted(k for k, v in os.environ.items() if 'leak-me' in v or 'hunter2' in v))"
    v = verify(SOFTMAX, _candidate(tmp_path, leak), fast_settings)
    assert v.passed, v.reason
    assert "ENV: []" in v.candidate_output, v.candidate_output


def test_a_secret_outside_the_ops_files_is_not_readable(fast_settings, tmp_path):
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text("PRIVATE KEY")
    v = verify(SOFTMAX, _candidate(tmp_path, f"open({str(secret)!r}).read()"), fast_settings)
    _refused(v, "id_ed25519")


def test_a_pth_planted_in_site_packages_is_refused(fast_settings, tmp_path):
    site_packages = Path(torch.__file__).parents[1]
    planted = site_packages / "forge_sandbox_test.pth"
    v = verify(SOFTMAX, _candidate(tmp_path, f"open({str(planted)!r}, 'w').write('import os')"), fast_settings)
    _refused(v, "forge_sandbox_test.pth")
    assert not planted.exists()


def test_the_bank_and_the_users_cache_are_not_writable(fast_settings, tmp_path, cache_dir):
    bank = tmp_path / "bank.db"
    bank.write_bytes(b"SQLite format 3\x00")
    v = verify(SOFTMAX, _candidate(tmp_path, f"open({str(bank)!r}, 'ab').write(b'x')"), fast_settings)
    _refused(v, "bank.db")
    target = cache_dir / "cpp" / "planted.so"  # the cache a user's program loads kernels from
    target.parent.mkdir(parents=True, exist_ok=True)
    v = verify(SOFTMAX, _candidate(tmp_path, f"open({str(target)!r}, 'wb').write(b'x')"), fast_settings)
    _refused(v, "planted.so")


def test_no_network(fast_settings, tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[object] = []
    done = threading.Event()
    listener = threading.Thread(target=_accept_until, args=(server, done, accepted), daemon=True)
    listener.start()
    connect = f"socket.create_connection(('127.0.0.1', {port}), timeout=5)"
    v = verify(SOFTMAX, _candidate(tmp_path, connect), fast_settings)
    done.set()
    listener.join(5)
    server.close()
    _refused(v, "Permission denied")
    assert accepted == []  # nothing connected


def _accept_until(server: socket.socket, done: threading.Event, accepted: list[object]) -> None:
    """Accept what connects to ``server`` until ``done`` is set (checked every 0.1 s)."""
    server.settimeout(0.1)
    while not done.is_set():
        try:
            accepted.append(server.accept())
        except TimeoutError:
            continue


def test_no_signal_or_proc_reach_outside_the_sandbox(fast_settings, tmp_path):
    v = verify(SOFTMAX, _candidate(tmp_path, "os.kill(os.getppid(), 0)"), fast_settings)
    _refused(v, "not permitted")
    v = verify(SOFTMAX, _candidate(tmp_path, "open(f'/proc/{os.getppid()}/environ').read()"), fast_settings)
    _refused(v, "environ")


LEAVE_A_CHILD = """
if os.fork() == 0:
    os.setsid()  # out of the worker's process group: no kill of the group reaches it
    if os.fork() == 0:
        import ctypes, time
        ctypes.CDLL(None).prctl(15, b"forge-leftover", 0, 0, 0)
        time.sleep(120)
    os._exit(0)
"""


def _leftovers() -> list[int]:
    """Live processes named as the candidate names its child."""
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "forge-leftover" and " Z " not in (comm.parent / "stat").read_text():
                found.append(int(comm.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not sandbox.namespaces_available().pid, reason="needs unprivileged user namespaces")
@pytest.mark.parametrize("template", sweep(["1", "0"], ids=["forked", "execd"], marker=pytest.mark.variants))
def test_a_child_left_behind_ends_with_its_worker(fast_settings, tmp_path, monkeypatch, template):
    monkeypatch.setenv("FORGE_WORKER_TEMPLATE", template)
    v = verify(SOFTMAX, _candidate(tmp_path, LEAVE_A_CHILD), fast_settings)
    assert v.passed, v.reason
    assert _leftovers() == []
    if template == "1":  # unconfined, the same candidate's child outlives the verification
        unconfined = verify(
            SOFTMAX, _candidate(tmp_path, LEAVE_A_CHILD), fast_settings.model_copy(update={"sandbox": False})
        )
        left = _leftovers()
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert unconfined.passed and left, unconfined.reason


@pytest.mark.skipif(not sandbox.namespaces_available().pid, reason="needs unprivileged user namespaces")
@pytest.mark.parametrize("template", ["1", "0"], ids=["forked", "execd"])
def test_a_worker_killed_behind_its_relays_is_named_as_killed(fast_settings, tmp_path, monkeypatch, template):
    monkeypatch.setenv("FORGE_WORKER_TEMPLATE", template)
    v = verify(SOFTMAX, _candidate(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)"), fast_settings)
    assert not v.passed and "killed by SIGKILL" in (v.reason or ""), v.reason
    assert "Traceback" not in v.candidate_output, v.candidate_output


def test_the_worker_born_in_its_namespace_is_the_one_watched(fast_settings, tmp_path, monkeypatch):
    monkeypatch.setenv("FORGE_WORKER_TEMPLATE", "0")  # the relays: small interpreters, not template copies
    grow = "_held = torch.ones(256 << 20, dtype=torch.uint8)  # held by the worker, not by its relays"
    v = verify(SOFTMAX, _candidate(tmp_path, grow), fast_settings)
    assert v.passed, v.reason
    assert v.memory is not None and (v.memory.candidate_mib or 0) > 256, v.memory


@pytest.mark.parametrize(
    ("name", "template"),
    sweep(
        [("honest_cpp.py", "1"), ("honest_cpp.py", "0"), ("honest_triton.py", "1")],
        ids=["cpp_forked", "cpp_execd", "triton_forked"],
        kept=2,  # Triton's interpreter takes ~10 s here
        marker=pytest.mark.variants,
    ),
)
def test_honest_kernels_pass_in_the_sandbox_forked_and_execd(fast_settings, monkeypatch, name, template):
    monkeypatch.setenv("FORGE_WORKER_TEMPLATE", template)  # "0": a worker started by exec enters it too
    v = verify(SOFTMAX, CANDIDATES / "softmax" / name, fast_settings)
    assert v.passed, (name, v.reason)


def test_the_environment_allowlist():
    assert allowed("OMP_NUM_THREADS") and allowed("TORCHINDUCTOR_CACHE_DIR") and allowed("CUDA_VISIBLE_DEVICES")
    assert not allowed("FORGE_LLM_API_KEY") and not allowed("FORGE_BANK") and not allowed("HF_TOKEN")
    assert not allowed("AWS_ACCESS_KEY_ID") and not allowed("RAY_ADDRESS") and not allowed("SSH_AUTH_SOCK")
