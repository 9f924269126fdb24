"""`forge optimize --executor ray` on a real local Ray cluster of two nodes (one CPU each) on this
machine: sessions spread over both nodes and search exactly as the local executor does; a node
killed mid-run loses nothing (its verification runs again on the other node, every attempt is
recorded once); a bad address is a clear error."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from forge.agents import CoderContext
from forge.agents.builtin import BuiltinCoder
from forge.core.problem import read_problem_source
from forge.core.verdict import Verdict
from tests.conftest import OPS as TEST_OPS

ray_cluster_utils = pytest.importorskip(
    "ray.cluster_utils", reason="Ray is not installed: pip install 'forge-kernels[ray]'"
)
pytestmark = pytest.mark.ray
ROOT = Path(__file__).resolve().parents[2]
# two ops, one session per node; small ones that bank by construction (~8x and ~5x eager): what is
# checked is where sessions run and what survives a lost node or driver, and the shipped examples at
# full size made these tests take ten minutes
OP_NAMES = ["pointwise_chain", "weighted_chain"]  # sorted: the reports are compared in order
OPS = [str(TEST_OPS / f"{name}.py") for name in OP_NAMES]


@contextlib.contextmanager
def _cluster() -> Iterator[object]:
    """A local cluster of two nodes, one CPU each."""
    cluster = ray_cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[object]:
    """One cluster for the tests that leave its nodes as they were (a killed driver's actors end
    with it, so the cluster's CPUs are free for the next test)."""
    with _cluster() as cluster:
        yield cluster


@pytest.fixture
def two_nodes_of_its_own() -> Iterator[object]:
    """A cluster for a test that removes one of its nodes."""
    with _cluster() as cluster:
        yield cluster


def _env(cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "FORGE_CACHE_DIR": str(cache),
        "FORGE_TIMING_BUDGET_S": "0.3",
        "FORGE_DEVICE": "cpu",
        "FORGE_CONFIRM_TRIALS": "10",
        "FORGE_LOAD_CHECK": "false",
    }


def _optimize(bank: Path, cache: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "forge",
        "optimize",
        *OPS,
        "--no-compile-baseline",
        "--bank",
        str(bank),
        "--json",
        *extra,
    ]


def _attempts(bank: Path) -> list[tuple[str, int, str, Verdict | None]]:
    """(op, round, candidate source, verdict: None while pending) of every coder attempt, in order."""
    try:
        with contextlib.closing(sqlite3.connect(bank)) as db:
            rows = db.execute(
                "SELECT p.name, a.round, a.candidate_source, a.verdict, a.status FROM attempts a "
                "JOIN sessions s ON a.session_id = s.id JOIN problems p ON s.problem_id = p.id "
                "WHERE a.role = 'coder' ORDER BY p.name, a.round, a.id"
            ).fetchall()
    except sqlite3.OperationalError:  # the driver is still creating the schema
        return []
    return [
        (op, rnd, src or "", Verdict.from_json(json.loads(v)) if v and st != "pending" else None)
        for op, rnd, src, v, st in rows
    ]


def test_sessions_spread_over_both_nodes_and_search_as_a_local_run(tmp_path, cache_dir, two_nodes):
    on_ray = subprocess.run(
        _optimize(
            tmp_path / "ray.db", cache_dir, "--rounds", "1", "--executor", "ray", "--ray-address", two_nodes.address
        ),  # type: ignore[attr-defined]
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(cache_dir),
        timeout=900,
    )
    assert on_ray.returncode == 0, on_ray.stderr  # both ops bank
    said = " ".join(on_ray.stderr.split())
    assert "ray (" in said and "2 nodes, cpu; each session asks for 1 CPU, 2 at once" in said
    there = _attempts(tmp_path / "ray.db")
    # the same search as a local run: the built-in coder's first candidate for every op (what the
    # next round tries depends on what this one measured; a local run of the same ops took as long
    # as the cluster's, so the coder is asked here directly)
    here = []
    for op in sorted(OPS, key=lambda path: Path(path).stem):
        spec = read_problem_source(Path(op))
        (first, *_) = BuiltinCoder(Path(op), "cpp", inductor_candidate=False).propose(
            CoderContext(spec.name, spec.source, "cpu", "cpp")
        )
        here.append((spec.name, first.source))
    assert here == [(op, src) for op, rnd, src, _ in there if rnd == 1]
    nodes = {v.node.node_id for *_, v in there if v is not None and v.node is not None}
    assert len(nodes) == 2 and all(v is not None and v.node is not None for *_, v in there)
    # what was banked on the cluster is a kernel the local search found too
    reports = {p["problem"]: p for p in json.loads(on_ray.stdout)["problems"]}
    assert sorted(reports) == OP_NAMES
    with sqlite3.connect(tmp_path / "ray.db") as db:
        banked = {op: src for op, src in db.execute("SELECT op_name, source FROM kernels")}
    assert set(banked) == set(OP_NAMES) and all(p["accepted"] for p in reports.values()), reports


def _start_on_cluster(bank: Path, cache: Path, rounds: int, address: str) -> subprocess.Popen[str]:
    """A cluster run of the ops in the background, its output piped."""
    return subprocess.Popen(
        _optimize(bank, cache, "--rounds", str(rounds), "--executor", "ray", "--ray-address", address),
        cwd=ROOT,
        env=_env(cache),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for(bank: Path, proc: subprocess.Popen[str], enough: int) -> None:
    """Until ``enough`` coder attempts have their verdicts (the driver still running)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        verified = sum(1 for *_, v in _attempts(bank) if v is not None) if bank.exists() else 0
        if verified >= enough:
            return
        time.sleep(0.5)
    raise AssertionError("the run made no progress")


def _session_nodes(bank: Path) -> dict[int, str]:
    """Each session's node: its latest verdict's (none before the bank has its tables)."""
    if not bank.exists():
        return {}
    try:
        with sqlite3.connect(bank) as db:
            rows = db.execute(
                "SELECT session_id, verdict FROM attempts WHERE role = 'coder' AND status != 'pending' ORDER BY id"
            ).fetchall()
    except sqlite3.OperationalError:  # the driver is creating the schema
        return {}
    return {sid: Verdict.from_json(json.loads(v)).node.node_id for sid, v in rows}  # type: ignore[union-attr]


def _in_flight(bank: Path, session_id: int) -> bool:
    with sqlite3.connect(bank) as db:
        return bool(
            db.execute(
                "SELECT count(*) FROM attempts WHERE session_id = ? AND status = 'pending'", (session_id,)
            ).fetchone()[0]
        )


def test_a_node_killed_mid_run_loses_nothing(tmp_path, cache_dir, two_nodes_of_its_own):
    two_nodes = two_nodes_of_its_own
    bank = tmp_path / "bank.db"
    proc = _start_on_cluster(bank, cache_dir, 2, two_nodes.address)  # type: ignore[attr-defined]
    worker = next(n for n in two_nodes.list_all_nodes() if n is not two_nodes.head_node)  # type: ignore[attr-defined]
    deadline = time.monotonic() + 600
    while True:  # a session on the worker node, with a verification running there: kill the node now
        assert proc.poll() is None and time.monotonic() < deadline, "no session verified on the worker node"
        on_worker = (
            [sid for sid, node in _session_nodes(bank).items() if node == worker.node_id] if bank.exists() else []
        )
        if on_worker and _in_flight(bank, on_worker[0]):
            break
        time.sleep(0.1)
    two_nodes.remove_node(worker, allow_graceful=False)  # type: ignore[attr-defined]
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err  # both ops bank, the lost node's too
    reports = json.loads(out)["problems"]
    assert sorted(p["problem"] for p in reports) == OP_NAMES
    with sqlite3.connect(bank) as db:
        statuses = [s for (s,) in db.execute("SELECT status FROM sessions")]
        pending = db.execute("SELECT count(*) FROM attempts WHERE status = 'pending'").fetchone()[0]
        per_round = db.execute(
            "SELECT session_id, round, count(*) FROM attempts WHERE role = 'coder' GROUP BY session_id, round"
        ).fetchall()
    assert len(statuses) == 2 and not {"running", "crashed"} & set(statuses), statuses
    assert pending == 0 and all(n == 1 for *_, n in per_round), per_round  # every attempt recorded once
    assert sum(p["attempts"] for p in reports) == len(per_round) == 4  # 2 ops, 2 rounds
    # the killed node's session went on on the head node, and its lost verification ran again there
    assert _session_nodes(bank)[on_worker[0]] == two_nodes.head_node.node_id  # type: ignore[attr-defined]
    verdicts = [v for *_, v in _attempts(bank) if v is not None]
    said_again = [w for v in verdicts for w in v.warnings if "was lost mid-verification" in w]
    assert said_again, "the verification in flight on the killed node was not run again"


def test_a_killed_driver_s_sessions_all_resume(tmp_path, cache_dir, two_nodes):
    bank = tmp_path / "bank.db"
    address = two_nodes.address  # type: ignore[attr-defined]
    proc = _start_on_cluster(bank, cache_dir, 2, address)
    _wait_for(bank, proc, 2)
    proc.kill()  # the driver: its actors end with it (Ray ends an owner's actors)
    proc.communicate()
    with sqlite3.connect(bank) as db:
        left = [sid for (sid,) in db.execute("SELECT id FROM sessions WHERE status = 'running' ORDER BY id")]
    assert left
    # the killed driver ran on this machine: its leases give way at once, and `all` finds its sessions
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge",
            "optimize",
            "--resume",
            "all",
            "--no-compile-baseline",
            "--bank",
            str(bank),
            "--json",
            "--executor",
            "ray",
            "--ray-address",
            address,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(cache_dir),
        timeout=900,
    )
    assert r.returncode == 0, r.stderr  # the resumed sessions bank
    assert sorted(p["session_id"] for p in json.loads(r.stdout)["problems"]) == left, r.stderr
    with sqlite3.connect(bank) as db:
        statuses = dict(db.execute("SELECT id, status FROM sessions").fetchall())
        per_round = db.execute(
            "SELECT session_id, round, count(*) FROM attempts WHERE role = 'coder' GROUP BY session_id, round"
        ).fetchall()
    assert all(statuses[sid] == "finished" for sid in left), statuses
    assert all(n == 1 for *_, n in per_round) and {(s, r) for s, r, _ in per_round if s in left} == {
        (s, r) for s in left for r in (1, 2)
    }


def test_ctrl_c_on_a_cluster_run_exits_130_and_sessions_resume(tmp_path, cache_dir, two_nodes):
    bank = tmp_path / "bank.db"
    proc = _start_on_cluster(bank, cache_dir, 6, two_nodes.address)  # type: ignore[attr-defined]
    _wait_for(bank, proc, 2)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    with sqlite3.connect(bank) as db:
        statuses = [s for (s,) in db.execute("SELECT status FROM sessions")]
    assert statuses and set(statuses) == {"interrupted"}, statuses


def test_a_cluster_that_is_not_there_is_a_clear_error(tmp_path, cache_dir):
    r = subprocess.run(
        _optimize(tmp_path / "bank.db", cache_dir, "--executor", "ray", "--ray-address", "127.0.0.1:9"),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(cache_dir),
        timeout=300,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "no Ray cluster answers there" in " ".join(r.stderr.split())
