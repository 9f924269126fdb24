"""prefault_heap touches the holes malloc_trim left in the heap, not only its top: an output that
lands in such a hole must not take its page faults inside a timed call."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc heap behaviour"
)

# A 20 MiB hole in the middle of the heap, its pages handed back by malloc_trim (as between a
# worker's phases); then the room is made and a 16 MiB output is written. Prints its page faults.
_PROGRAM = textwrap.dedent(
    """
    import resource, torch
    from forge.verifier.memory import release_free_memory
    from forge.verifier.timing import prefault_heap
    n = 16 << 20
    hole = torch.ones(n + (4 << 20), dtype=torch.uint8)  # room for any alignment
    after = torch.ones(n, dtype=torch.uint8)  # keeps the hole from merging with the top
    del hole
    release_free_memory()
    prefault_heap([[torch.ones(1 << 20, dtype=torch.uint8)]])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out = torch.empty(n, dtype=torch.uint8).fill_(1)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def test_an_output_landing_in_a_trimmed_hole_is_not_faulted_in_while_timed() -> None:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    faults = int(done.stdout.strip().splitlines()[-1])
    # 16 MiB is 4096 pages; a few pages of torch's own bookkeeping may still fault.
    assert faults < 64, f"the output took {faults} page faults"


_ROOM_PROGRAM = textwrap.dedent(
    """
    import torch
    from forge.verifier.memory import resident_bytes
    from forge.verifier.timing import prefault_heap
    big = [[torch.ones(64 << 20, dtype=torch.uint8)]]  # above the mmap threshold
    before = resident_bytes()
    prefault_heap(big)
    print((resident_bytes() - before) >> 20)
    """
)


def test_no_heap_room_is_made_for_tensors_the_allocator_maps_on_their_own() -> None:
    """A 64 MiB input set: its outputs are mapped fresh whatever the heap holds, so the room is
    the fixed 64 MiB (+ the small blocks), not three times the set."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
    done = subprocess.run(
        [sys.executable, "-c", _ROOM_PROGRAM], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    grown_mib = int(done.stdout.strip().splitlines()[-1])
    assert 64 <= grown_mib < 128, f"the heap grew by {grown_mib} MiB"
