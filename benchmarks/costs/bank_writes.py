"""What the driver's bank writes cost, and what session leases add to them.

A driver writes each attempt as its own commit (``forge.db.sessions``); with leases, each of those
transactions first renews the session's lease where the token is still the driver's (``touch``),
and a heartbeat thread renews every held lease each 15 s. This prints, for a SQLite file and (when
the PostgreSQL server binaries are here) a server started in a temporary directory:

- attempt commits per second from one thread, as forge writes them (``add_proposal``: touch and
  insert in one transaction), and the same insert without the touch (what the lease costs);
- the same from T threads at once (one session each), as a cluster run's driver writes;
- one heartbeat renewing L leases (the keeper's beat for a driver with L sessions in flight);
- claiming a session (``claim_session``: a read, then a compare-and-set).

Each figure is the median of R repeats, with the spread (min-max). Compare within one run.

Usage: python -m benchmarks.costs.bank_writes [--writes N] [--threads T] [--leases L] [--repeats R] [--no-server]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from benchmarks.support.pg_server import running_server, server_binaries
from forge.core.candidate_config import CandidateConfig
from forge.core.paths import BankLocation
from forge.core.problem import read_problem_source
from forge.core.statuses import AttemptRole, AttemptStatus
from forge.db import Driver, SessionLease, claim_session, release_lease, renew_leases
from forge.db.engine import open_for_writing, session_factory
from forge.db.models import AttemptRow
from forge.db.sessions import add_proposal, start_session

OP = ROOT / "examples" / "ops" / "rmsnorm.py"
SOURCE = "import torch\n" * 200  # a candidate of a few KB, as real ones are
ME = Driver.this_process()


def _new_session(engine: Engine) -> SessionLease:
    spec = read_problem_source(OP)
    return start_session(engine, spec, "b" * 64, None, "refine", "builtin", None, {}, ME)


def _with_lease(engine: Engine, lease: SessionLease) -> None:
    add_proposal(engine, lease, 1, source=SOURCE, backend="cpp", config=CandidateConfig(), note="")


def _without_lease(engine: Engine, lease: SessionLease) -> None:
    row = AttemptRow(
        session_id=lease.session_id,
        round=1,
        role=str(AttemptRole.CODER),
        candidate_source=SOURCE,
        backend="cpp",
        status=str(AttemptStatus.PENDING),
        verdict={"note": ""},
    )
    with session_factory(engine).begin() as db:
        db.add(row)


def _rate(engine: Engine, write: Callable[[Engine, SessionLease], None], writes: int, threads: int) -> float:
    """Commits per second with ``threads`` sessions written at once, ``writes`` commits each."""
    leases = [_new_session(engine) for _ in range(threads)]
    start = threading.Barrier(threads + 1)

    def one(lease: SessionLease) -> None:
        start.wait()
        for _ in range(writes):
            write(engine, lease)

    workers = [threading.Thread(target=one, args=(lease,)) for lease in leases]
    for w in workers:
        w.start()
    start.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    return writes * threads / (time.perf_counter() - t0)


def _seconds(action: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


def _claim_once(engine: Engine) -> float:
    lease = _new_session(engine)
    release_lease(engine, lease)
    return _seconds(lambda: claim_session(engine, lease.session_id, ME))


def _show(name: str, values: list[float], unit: str, scale: float = 1.0) -> None:
    v = [x * scale for x in values]
    print(f"  {name:<44} {statistics.median(v):>9.1f} {unit}  ({min(v):.1f}-{max(v):.1f})")


def measure(where: str, args: argparse.Namespace) -> None:
    engine = open_for_writing(BankLocation.parse(where))
    try:
        print(f"{BankLocation.parse(where)}:")
        for threads in (1, args.threads):
            leased = [_rate(engine, _with_lease, args.writes, threads) for _ in range(args.repeats)]
            plain = [_rate(engine, _without_lease, args.writes, threads) for _ in range(args.repeats)]
            _show(f"attempt commits/s, {threads} thread(s), with the lease", leased, "/s")
            _show(f"attempt commits/s, {threads} thread(s), no lease check", plain, "/s")
            cost = [(1 / a - 1 / b) * 1000 for a, b in zip(leased, plain, strict=True)]
            _show(f"the lease's cost per commit ({threads} thread(s))", cost, "ms")
        leases = [_new_session(engine) for _ in range(args.leases)]
        beats = [_seconds(lambda: renew_leases(engine, leases)) for _ in range(args.repeats)]
        _show(f"one heartbeat renewing {args.leases} leases", beats, "ms", 1000)
        claims = [_claim_once(engine) for _ in range(args.repeats)]
        _show("claiming a session", claims, "ms", 1000)
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=300, help="commits per thread")
    parser.add_argument("--threads", type=int, default=8, help="sessions written at once")
    parser.add_argument("--leases", type=int, default=256, help="leases one heartbeat renews")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-server", action="store_true", help="skip the PostgreSQL bank")
    add_page_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="forge-bank-writes-") as tmp:
        measure(str(Path(tmp) / "bank.db"), args)
        if args.no_server:
            return
        bindir = server_binaries()
        if bindir is None:
            print("PostgreSQL: no server binaries here (apt-get install postgresql); skipped")
            return
        with running_server(bindir) as server:
            measure(server.new_database(), args)


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Bank writes: commits per second, with and without leases"))
