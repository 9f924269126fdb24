"""A real PostgreSQL server for the shared-bank tests and ``costs.bank_writes``, started in a
temporary directory.

The server binaries come from the system's package (``.ci/run`` installs Debian's postgresql);
where they are missing the tests that need one skip and say so, and so does the benchmark.
PostgreSQL refuses to run as root, so under root the cluster belongs to ``nobody`` and its
commands run through ``runuser``.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def server_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl: on PATH, or Debian's versioned directory."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    return Path(versions[0]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "nobody", "--", *cmd] if os.geteuid() == 0 else cmd


@dataclass(frozen=True)
class PgServer:
    port: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://forge@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database on this server; its URL."""
        import psycopg

        name = "bank_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
        return self.url(name)


@contextmanager
def running_server(bindir: Path) -> Iterator[PgServer]:
    """initdb, start, yield, stop: the whole cluster lives in a temporary directory."""
    home = Path(tempfile.mkdtemp(prefix="forge-pg-"))
    data, log = home / "data", home / "server.log"
    if os.geteuid() == 0:
        shutil.chown(home, "nobody")
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C"}
    # UTF8: a server in SQL_ASCII hands psycopg bytes, not text
    initdb = [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "forge", "-E", "UTF8", "--locale=C"]
    subprocess.run(_as_owner([*initdb, "--no-sync"]), check=True, capture_output=True, env=env)
    options = f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    start = [str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start"]
    subprocess.run(_as_owner(start), check=True, capture_output=True, env=env)
    try:
        yield PgServer(port)
    finally:
        subprocess.run(
            _as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]), capture_output=True
        )
        shutil.rmtree(home, ignore_errors=True)
