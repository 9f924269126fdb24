"""The sandbox from a user's project folder, by the real verifier: the folder holds the op, a
``.env`` with a canary key, a TLS key, a ``.git`` and a bank, and forge runs from it. A candidate
that stays correct and does one more thing (reads the key, sends it over UDP or a Unix socket,
leaves shared memory for the next verification) is refused with the refusal named, and the
canary never appears in the verdict; the op's own helper module beside it still imports."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import threading
from pathlib import Path

import pytest

from forge.core import sandbox
from forge.verifier import verify
from forge.verifier.processes.worker_env import REFERENCE, workers_cache
from tests.conftest import CANDIDATES, OPS
from tests.verifier.test_sandbox import FORWARD, _accept_until

CANARY = "zq9" + secrets.token_hex(12)  # in the project's .env, a value shaped like a token
pytestmark = pytest.mark.skipif(sandbox.abi_version() < 6, reason="needs Landlock ABI 6 (Linux 6.12)")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder, the working directory: the op (importing a helper module beside it), a
    .env, a key, a .git, a bank."""
    folder = tmp_path / "project"
    folder.mkdir()
    op = (OPS / "small_softmax.py").read_text()
    (folder / "softmax_op.py").write_text("import op_helpers  # a module of the project\n" + op)
    (folder / "op_helpers.py").write_text("SCALE = 1.0\n")
    (folder / ".env").write_text(f"OPENAI_API_KEY={CANARY}\nDEBUG=1\n")
    (folder / "server.pem").write_text("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("[remote]\nurl = https://user:pat@example.com\n")
    (folder / "bank.db").write_bytes(b"SQLite format 3\x00")
    (folder / "secrets.py").write_text(f"API_KEY = {CANARY!r}\n")  # a common idiom, gitignored
    monkeypatch.chdir(folder)
    return folder


def _candidate(project: Path, at_import: str) -> Path:
    path = project / "attempt.py"
    path.write_text("import os, socket, sys\nimport torch\n" + at_import + "\n" + FORWARD)
    return path


def _verify(project: Path, at_import: str, settings):
    return verify(project / "softmax_op.py", _candidate(project, at_import), settings)


def _received(sock: socket.socket) -> bytes | None:
    """What reached ``sock`` (a datagram listener with a timeout), closing it; None: nothing."""
    try:
        return sock.recv(64)
    except TimeoutError:
        return None
    finally:
        sock.close()


def _refused(v, fragment: str) -> None:
    assert not v.passed, v.reason
    assert "Permission denied" in (v.reason or ""), v.reason
    assert fragment in (v.reason or ""), v.reason


def _no_canary(v) -> None:
    assert CANARY not in v.model_dump_json(), "the canary key reached the verdict"


def test_the_projects_own_module_imports_and_an_honest_candidate_passes(project, fast_settings):
    v = _verify(project, "import op_helpers\nassert op_helpers.SCALE == 1.0", fast_settings)
    assert v.passed, (v.status, v.reason, [c for c in v.checks if not c.passed], v.warnings)


@pytest.mark.parametrize("secret", [".env", "server.pem", ".git/config", "bank.db", "secrets.py"])
def test_what_the_project_keeps_beside_the_op_is_not_readable(project, fast_settings, secret):
    v = _verify(project, f"print(open({str(project / secret)!r}).read())", fast_settings)
    _refused(v, secret.split("/")[-1])
    _no_canary(v)


def test_a_key_the_candidate_prints_or_raises_is_redacted(project, fast_settings):
    # the canary is known to forge from the project's .env; the sk- key by its shape alone
    shaped = "sk-" + "proj" + secrets.token_hex(12)
    v = _verify(project, f"print({CANARY[:6]!r} + {CANARY[6:]!r}, {shaped[:5]!r} + {shaped[5:]!r})", fast_settings)
    assert v.passed, v.reason
    assert "[redacted:" in v.candidate_output and shaped not in v.model_dump_json(), v.candidate_output
    _no_canary(v)
    assert any("redacted" in w for w in v.warnings), v.warnings
    v = _verify(project, f"raise RuntimeError('key ' + {CANARY[:6]!r} + {CANARY[6:]!r})", fast_settings)
    assert not v.passed and "[redacted:" in (v.reason or ""), v.reason
    _no_canary(v)


def test_no_udp_datagram_leaves(project, fast_settings):
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    send = f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {port}))"
    v = _verify(project, send, fast_settings)
    got = _received(listener)
    _refused(v, "Permission denied")
    assert got is None, got


def test_no_unix_socket_by_its_path(project, fast_settings, tmp_path):
    path = tmp_path / "agent.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    accepted: list[object] = []
    done = threading.Event()
    thread = threading.Thread(target=_accept_until, args=(server, done, accepted), daemon=True)
    thread.start()
    connect = f"s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); s.sendall(b'leak')"
    v = _verify(project, connect, fast_settings)
    done.set()
    thread.join(5)
    server.close()
    _refused(v, "Permission denied")
    assert accepted == []


@pytest.mark.skipif(not sandbox.namespaces_available().private_shm, reason="needs unprivileged mount namespaces")
def test_shared_memory_is_the_workers_own(project, fast_settings):
    name = f"forge-planted-{secrets.token_hex(6)}"
    plant = f"open('/dev/shm/{name}', 'w').write('state for the next verification')"
    v = _verify(project, plant, fast_settings)
    assert v.passed, v.reason
    assert not (Path("/dev/shm") / name).exists()  # it was the worker's own /dev/shm
    host = Path("/dev/shm") / f"forge-host-{secrets.token_hex(6)}"
    host.write_text("the machine's")
    try:
        look = f"assert not os.path.exists({str(host)!r}), 'the host /dev/shm is in sight'"
        v = _verify(project, look, fast_settings)
    finally:
        host.unlink()
    assert v.passed, v.reason


@pytest.mark.e2e  # a cold cpp_extension build (25-30 s on 2 cores): .ci/run's heavy run
def test_honest_cpp_and_load_inline_candidates_pass_from_the_project(project, fast_settings):
    for name in ("honest_cpp.py", "honest_load_inline.py"):
        shutil.copy(CANDIDATES / "softmax" / name, project / name)
        v = verify(project / "softmax_op.py", project / name, fast_settings)
        assert v.passed, (name, v.reason)
    assert os.getcwd() == str(project)


def test_a_candidate_writes_its_own_folder_alone_and_no_other_reads_it(project, fast_settings):
    workers = workers_cache(fast_settings.cache_path())
    plant = "p = os.path.join(os.environ['FORGE_CACHE_DIR'], 'planted.txt'); open(p, 'w').write('x'); print('AT', p)"
    v = _verify(project, plant, fast_settings)
    assert v.passed, v.reason
    planted = Path(v.candidate_output.split("AT ", 1)[1].split()[0])
    assert planted.is_file() and planted.parent.parent == workers / "candidates"
    v = _verify(project, f"print(open({str(planted)!r}).read())  # another source", fast_settings)
    _refused(v, "planted.txt")
    target = workers / REFERENCE / "inductor" / "planted.py"  # the reference's torch.compile cache
    target.parent.mkdir(parents=True, exist_ok=True)
    v = _verify(project, f"open({str(target)!r}, 'w').write('import os')", fast_settings)
    _refused(v, "planted.py")
    assert not target.exists()


def test_no_datagram_reaches_a_unix_socket_by_its_path(project, fast_settings, tmp_path):
    """A socket pair of datagrams, made without socket(), could sendto() any path (/dev/log)."""
    path = tmp_path / "log.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(path))
    server.settimeout(0.5)
    send = f"a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b'leak', {str(path)!r})"
    v = _verify(project, send, fast_settings)
    got = _received(server)
    _refused(v, "Permission denied")
    assert got is None, got


def test_a_project_module_named_as_the_standard_librarys_is_not_imported_for_it(project, fast_settings):
    """The project's secrets.py is not imported (unconfined, by the worker template started in the
    project) in place of the standard library's: no candidate finds its values in memory."""
    look = "import secrets as _s\nassert hasattr(_s, 'token_hex') and not hasattr(_s, 'API_KEY'), _s"
    v = _verify(project, look, fast_settings)
    assert v.passed, v.reason
