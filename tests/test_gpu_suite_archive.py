"""The GPU suite's archive: what a loan brings back (one file) holds the parts' results and the bank
a later part reads, whole, and unpacking it takes nothing outside the suite's folder."""

from __future__ import annotations

import io
import sqlite3
import tarfile

from benchmarks.gpu_suite.archive import pack, unpack


def test_a_packed_run_unpacks_with_its_banks_whole(tmp_path):
    out = tmp_path / "suite"
    (out / "parts").mkdir(parents=True)
    (out / "work").mkdir()
    (out / "parts" / "env.json").write_text('{"name": "env"}')
    (out / "report.md").write_text("# report")
    bank = sqlite3.connect(out / "work" / "optimize.db")
    bank.execute("PRAGMA journal_mode=WAL")
    bank.execute("CREATE TABLE kernels (id INTEGER)")
    bank.execute("INSERT INTO kernels VALUES (7)")
    bank.commit()  # still in the write-ahead log while the connection stays open: a plain copy misses it
    (out / "work" / "catalog.db").write_bytes(b"no later part reads it")  # left out: the archive travels
    archive = pack(out, tmp_path / "back")
    bank.close()

    fresh = tmp_path / "fresh"
    (fresh / "work").mkdir(parents=True)
    (fresh / "work" / "optimize.db-wal").write_bytes(b"an old run's log, which would be replayed")
    assert unpack(archive, fresh) == 3
    assert not (fresh / "work" / "optimize.db-wal").exists() and not (fresh / "work" / "catalog.db").exists()
    assert (fresh / "parts" / "env.json").read_text() == '{"name": "env"}'
    assert (fresh / "report.md").is_file()
    with sqlite3.connect(fresh / "work" / "optimize.db") as copy:
        assert copy.execute("SELECT id FROM kernels").fetchall() == [(7,)]


def test_unpacking_takes_only_the_suites_own_files(tmp_path):
    archive = tmp_path / "suite.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("parts/env.json", "../escaped.json", "elsewhere/x.json", "report.md"):
            data = b"{}"
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    out = tmp_path / "out"
    assert unpack(archive, out) == 2
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == ["parts/env.json", "report.md"]
    assert not (tmp_path / "escaped.json").exists()
