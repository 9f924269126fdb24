"""Throughput of `forge optimize` with the local executor and on Ray, and what Ray adds to one
verification.

Part 1, ops per hour: the same N ops (the shipped examples, built-in agent, ``--rounds R``), each
run into a fresh bank, with
- the local executor (one session after another, on all cores);
- Ray, one node with every core (one session at a time, on all cores);
- Ray, two nodes of half the cores each (two sessions at once, each on its half).
The wall time covers the whole run (connecting to the cluster included); ops/hour = N / wall.
This machine has two cores: its ceiling is two sessions at once.

Part 2, per-verification overhead: one small op's candidate verified K times on this machine
(``VerifierService``) and K times through Ray on a one-node cluster (``RemoteVerifier``: the actor
call, the JSON verdict, the validation), alternating, with the same settings and thread count.
Overhead = (median remote - median local) / median local; the target is under 5%. The part spent
outside the verification (wall time minus the verdict's own ``elapsed_s``: the actor call, the
JSON, the validation) is shown apart from the verification running slower in the node's actor.

``--runs local,ray1,ray2`` picks the executors; ``--no-load-check`` records other processes' load
instead of timing a batch again (two "nodes" on one 2-core machine share its cores, so each sees
the other session as load: with the check on, that is measured, not hidden).

Usage: python -m benchmarks.costs.scale [--ops N] [--rounds R] [--repeats K] [--skip-throughput]
       [--runs local,ray1,ray2] [--no-load-check]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge import harness
from forge.cluster import RemoteVerifier, connect, disconnect
from forge.core.settings import ForgeSettings
from forge.verifier import Job, VerifierService

EXAMPLES = sorted((ROOT / "examples" / "ops").glob("*.py"))
SMALL_OP = ROOT / "examples" / "ops" / "rmsnorm.py"
SMALL_CANDIDATE = ROOT / "examples" / "candidates" / "rmsnorm_cpp.py"
CORES = len(os.sched_getaffinity(0))


@contextmanager
def cluster(node_cpus: list[int]) -> Iterator[str]:
    """A local Ray cluster with one node per entry (its CPUs); yields its address."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": node_cpus[0]})
    for cpus in node_cpus[1:]:
        c.add_node(num_cpus=cpus)
    c.wait_for_nodes()
    try:
        yield c.address
    finally:
        disconnect()
        c.shutdown()


def settings(**over: object) -> ForgeSettings:
    base = {"device": "cpu", "compile_baseline": False, "cache_dir": Path(tempfile.gettempdir()) / "forge-scale"}
    return ForgeSettings(**{**base, **over})  # type: ignore[arg-type]


def one_run(ops: list[Path], rounds: int, s: ForgeSettings) -> tuple[float, int]:
    """Wall seconds for the whole run, and how many ops it banked a kernel for."""
    with tempfile.TemporaryDirectory() as tmp:
        options = harness.OptimizeOptions(rounds=rounds, bank=Path(tmp) / "bank.db")
        start = time.perf_counter()
        result = harness.optimize(ops, options, s)
        wall = time.perf_counter() - start
    return wall, sum(1 for r in result.results if r.accepted)


def throughput(n_ops: int, rounds: int, which: list[str], load_check: bool) -> None:
    ops = EXAMPLES[:n_ops]
    check = "on" if load_check else "off"
    print(
        f"ops per hour, {len(ops)} ops x {rounds} rounds (built-in agent, compile baseline off, load check "
        f"{check}), {CORES} cores"
    )
    print(f"{'executor':<34} {'wall s':>8} {'ops/hour':>9} {'banked':>7}")
    runs: dict[str, tuple[str, list[int] | None]] = {
        "local": ("local (one session at a time)", None),
        "ray1": (f"ray, 1 node x {CORES} CPU", [CORES]),
        "ray2": (f"ray, 2 nodes x {CORES // 2} CPU", [CORES // 2, CORES - CORES // 2]),
    }
    for label, nodes in (runs[w] for w in which):
        if nodes is None:
            wall, banked = one_run(ops, rounds, settings(load_check=load_check))
        else:
            with cluster(nodes) as address:
                s = settings(executor="ray", ray_address=address, load_check=load_check)
                wall, banked = one_run(ops, rounds, s)
        print(f"{label:<34} {wall:8.1f} {len(ops) / wall * 3600:9.0f} {banked:7d}")


def overhead(repeats: int) -> None:
    job = Job("candidate", SMALL_CANDIDATE.read_text())
    s = settings(threads=CORES)
    local_s: list[float] = []
    remote_s: list[float] = []
    outside: dict[str, list[float]] = {"local": [], "ray": []}  # wall time beyond the verdict's own elapsed_s
    with cluster([CORES]) as address:
        plan = connect(address, s)
        remote = RemoteVerifier(SMALL_OP, s, plan, 1, threading.Event())
        with VerifierService(SMALL_OP, s, "cpu") as local:
            local.verify([job]), remote.verify([job])  # warm: the template, the reference worker, the build
            for _ in range(repeats):
                for side, service, into in (("local", local, local_s), ("ray", remote, remote_s)):
                    start = time.perf_counter()
                    (verdict,) = service.verify([job])
                    into.append(time.perf_counter() - start)
                    outside[side].append(into[-1] - verdict.elapsed_s)
                    assert verdict.passed, verdict.reason
        remote.close()
        assert ray.is_initialized()
    lm, rm = statistics.median(local_s), statistics.median(remote_s)
    print(f"\nper-verification overhead, {SMALL_OP.name} + {SMALL_CANDIDATE.name}, {repeats} each, alternating")
    print(f"  local  median {lm:.3f} s  (min {min(local_s):.3f}, max {max(local_s):.3f})")
    print(f"  ray    median {rm:.3f} s  (min {min(remote_s):.3f}, max {max(remote_s):.3f})")
    print(f"  overhead {(rm - lm) / lm * 100:+.1f}% of a verification ({(rm - lm) * 1000:+.0f} ms); target < 5%")
    lo, ro = statistics.median(outside["local"]), statistics.median(outside["ray"])
    print(
        f"  of which outside the verification itself (wall - the verdict's elapsed_s): local {lo * 1000:.0f} ms, "
        f"ray {ro * 1000:.0f} ms: the transport adds {(ro - lo) * 1000:+.0f} ms ({(ro - lo) / lm * 100:+.1f}%)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=len(EXAMPLES))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--runs", default="local,ray1,ray2")
    ap.add_argument("--no-load-check", action="store_true")
    add_page_option(ap)
    args = ap.parse_args()
    if not args.skip_throughput:
        throughput(args.ops, args.rounds, args.runs.split(","), not args.no_load_check)
    if args.repeats:
        overhead(args.repeats)


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Throughput: local and Ray executors"))
