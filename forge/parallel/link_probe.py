"""The link between local ranks, measured: ``python -m forge.parallel.link_probe RESULT.json`` on
each rank (spawned by ``mesh_run.measure_link``) times all-reduces over gloo, of one element (the
latency a collective costs before any byte moves) and of 4 MiB; rank 0 writes the latency and the
bus bandwidth (bytes a ring all-reduce moves per second per rank, the latency taken out)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from forge.parallel.rank_exit import leave_group

SIZE = 1 << 20  # float32 elements: 4 MiB
REPEATS = 10


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    n = dist.get_world_size()
    x = torch.ones(SIZE)
    dist.all_reduce(x)  # warm-up: connections set up
    times = []
    for _ in range(REPEATS):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(x)
        times.append(time.perf_counter() - t0)
    tiny, small = torch.ones(1), []
    for _ in range(REPEATS * 5):  # one element: what a collective costs before any byte moves
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(tiny)
        small.append(time.perf_counter() - t0)
    latency = statistics.median(small)
    moved = 2 * (n - 1) / n * SIZE * 4
    if int(os.environ["RANK"]) == 0:
        bandwidth = moved / max(statistics.median(times) - latency, 1e-9)
        Path(sys.argv[1]).write_text(json.dumps({"bytes_per_s": bandwidth, "latency_s": latency, "world_size": n}))
    leave_group()


if __name__ == "__main__":
    main()
