"""What the candidate worker sees of the candidate's own process, for the parent to judge: the
threads it started and whether they still run, and an error told in the candidate's own frames.
Runs in the process the candidate controls: it observes, it decides nothing."""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections.abc import Iterable
from pathlib import Path

_IDLE_FILES = ("threading.py", "queue.py", "thread.py", "selectors.py")
_MAX_ERROR = 4000


def candidate_trace(exc: BaseException, path: str) -> str:
    """The error with the candidate's own frames (file:line) and a trimmed message."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    head = "".join(f"  {Path(f.filename).name}:{f.lineno} in {f.name}: {f.line}\n" for f in frames[-4:])
    msg = f"{type(exc).__name__}: {exc}"
    if len(msg) > _MAX_ERROR:
        lines = msg.splitlines()
        errs = [ln for ln in lines if "error" in ln.lower()][:20]
        msg = "\n".join([*lines[:3], "[...]", *errs])[:_MAX_ERROR]
    return (head + msg).strip()


def native_threads() -> set[int]:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def thread_names(tids: Iterable[int]) -> list[str]:
    """The kernel's names of these threads (what started them often names them), for the verdict."""
    names = []
    for tid in sorted(tids):
        try:
            names.append(Path(f"/proc/self/task/{tid}/comm").read_text().strip())
        except OSError:  # ended meanwhile
            continue
    return names


def busy_python_threads(before: set[threading.Thread]) -> list[str]:
    """New Python threads still alive and not parked in a wait (idle pool workers are fine)."""
    # Only the other threads' file names are kept: the frames dict holds this very frame, and a
    # frame that refers to itself is a cycle that kept the calling case's tensors alive until
    # the garbage collector ran (+130 MB a case on a 16 MB op).
    files = {ident: Path(f.f_code.co_filename).name for ident, f in sys._current_frames().items()}
    busy = []
    for t in threading.enumerate():
        if t in before or not t.is_alive() or t.ident is None:
            continue
        if files.get(t.ident) in _IDLE_FILES:
            continue
        busy.append(t.name)
    return busy
