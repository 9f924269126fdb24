"""What a loan brings back of a GPU suite run, in one file: the parts' results, the report and the
bank a later part reads (``pack``), and a fresh machine continuing from it (``unpack``)."""

from __future__ import annotations

import os
import sqlite3
import tarfile
import tempfile
from pathlib import Path

ARCHIVE = "suite.tar.gz"
# the banks a later part reads (the runtime part's reproduce.py reads the optimize part's); the
# others stay out of the archive, which travels to the lent machine with every call (64 MiB in all)
KEPT_BANKS = ("optimize.db",)


def pack(out: Path, to: Path) -> Path:
    """What a later run continues from, in one file (a loan brings back a few files only): the
    parts' results, the report, and the banks later parts read, each bank copied whole through
    SQLite's backup (a copy of the file alone could miss what its write-ahead log still holds).
    Written beside the archive and then renamed over it: a command killed while packing leaves
    the last whole one."""
    to.mkdir(parents=True, exist_ok=True)
    archive = to / ARCHIVE
    writing = to / f".{ARCHIVE}.writing"
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(writing, "w:gz") as tar:
        for path in [*out.glob("parts/*.json"), *out.glob("report.*")]:
            tar.add(path, arcname=str(path.relative_to(out)))
        for db in (out / "work" / name for name in KEPT_BANKS):
            if not db.is_file():
                continue
            copy = Path(tmp) / db.name
            with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
                src.backup(dst)
            tar.add(copy, arcname=f"work/{db.name}")
    os.replace(writing, archive)
    return archive


def remove_bank(db: Path) -> None:
    """A SQLite bank and the write-ahead log and shared memory beside it (a log left behind would
    be replayed into the next bank of that name)."""
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        path.unlink(missing_ok=True)


def unpack(archive: Path, out: Path) -> int:
    """An earlier run's archive into ``out`` (what it holds replaces what is there); the files
    it held. Only plain files under ``parts/``, ``work/`` and the report are taken."""
    taken = 0
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            fits = member.isfile() and ".." not in parts and (len(parts) == 1 or parts[0] in ("parts", "work"))
            if not fits:
                continue
            target = out / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.suffix == ".db":
                remove_bank(target)
            source = tar.extractfile(member)
            if source is not None:
                target.write_bytes(source.read())
                taken += 1
    return taken
