"""prefault_heap: the heap room made before timed calls, sized from the inputs the heap holds and
shaped as a user's process has it: an output below the mmap threshold lands on touched memory, one
at or above it is mapped fresh by every call (``timing.heap_room``).

(Filling the holes malloc_trim leaves in the middle of the heap as well was tried and withdrawn:
it biased the timing towards the candidate; see ``prefault_heap``.)"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc heap behaviour"
)


def _huge_pages_always() -> bool:
    """Transparent huge pages on for every mapping: a fresh 64 MiB faults in 2 MiB at a time."""
    with contextlib.suppress(OSError):
        return "[always]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    return False


# the tests that count a fresh mapping's faults, one per 4 KiB page
counts_small_pages = pytest.mark.skipif(_huge_pages_always(), reason="transparent huge pages on for every mapping")

_ROOM_PROGRAM = textwrap.dedent(
    """
    import torch
    from forge.verifier.machine.memory import resident_bytes
    from forge.verifier.worker.timing.heap_room import prefault_heap
    big = [[torch.ones(64 << 20, dtype=torch.uint8)]]  # above the mmap threshold
    before = resident_bytes()
    prefault_heap(big)
    print((resident_bytes() - before) >> 20)
    """
)


def test_no_heap_room_is_made_for_tensors_the_allocator_maps_on_their_own() -> None:
    """A 64 MiB input set: its outputs are mapped fresh whatever the heap holds, so the room is
    the fixed 64 MiB (in blocks just under 32 MiB), not three times the set."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
    done = subprocess.run(
        [sys.executable, "-c", _ROOM_PROGRAM], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    grown_mib = int(done.stdout.strip().splitlines()[-1])
    assert 64 <= grown_mib < 128, f"the heap grew by {grown_mib} MiB"


# The pages of a new tensor that hold no memory yet (mincore, read before anything writes them):
# each is a first-touch fault, the kernel zeroing a page, inside the call that writes it. Counted
# rather than the process's faults, which also count the kernel's NUMA-balancing faults on pages
# that are resident (a CI host took one per page of a room part that was resident).
_UNTOUCHED = """
    import ctypes
    def untouched_at(address, nbytes):
        libc = ctypes.CDLL(None, use_errno=True)
        start = address // 4096 * 4096
        length = address + nbytes - start
        vec = (ctypes.c_ubyte * -(-length // 4096))()
        if libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(length), vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return sum(1 for v in vec if not v & 1)
    def untouched(tensor):
        return untouched_at(tensor.data_ptr(), tensor.numel() * tensor.element_size())
"""

_TOP_PROGRAM = (
    _UNTOUCHED
    + """
    import torch
    from forge.verifier.worker.timing.heap_room import prefault_heap
    prefault_heap([[torch.ones(8 << 20, dtype=torch.uint8)]])  # room: 3 x 8 MiB + 64 MiB
    print(untouched(torch.empty(16 << 20, dtype=torch.uint8)))
"""
)


def test_an_output_at_the_top_of_the_heap_is_not_faulted_in_while_timed() -> None:
    """The room is touched memory kept by the process: a 16 MiB output (4096 pages) made after it
    lands on resident pages, almost all of them."""
    [pages] = _printed_counts(_TOP_PROGRAM)
    assert pages < 64, f"{pages} of the output's 4,096 pages were never touched"


def _printed_counts(program: str, threads: int = 1) -> list[int]:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
    env["OMP_NUM_THREADS"] = str(threads)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [int(n) for n in done.stdout.split()]


# touched 20 MiB blocks freed together: free heap space a threshold-sized request could land in
_FREED = """
    import ctypes
    from forge.verifier.worker.timing import heap_room as _room
    def free_touched_blocks(count):
        libc = _room._libc()
        blocks = [libc.malloc(20 << 20) for _ in range(count)]
        for b in blocks:
            ctypes.memset(b, 1, 20 << 20)
        for b in blocks:
            libc.lib.free(b)
"""

_FAULTS = """
    import resource
    def faults(call):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        out = call()
        taken = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        del out
        return taken
"""


@counts_small_pages
def test_an_output_of_the_mmap_threshold_or_more_is_mapped_fresh_by_every_call_as_in_a_users_loop():
    """The room made for two 64 MiB inputs was freed as one 72 MiB chunk, and their 64 MiB product
    landed in it, on some calls: no page faults in the workers, 16,385 a call in a user's loop (a
    SwiGLU's rounds read 3-4 ms where its user's loop read 15). Now each call faults its 16,384
    pages in. (With two threads the old room served the first call; the next test shows the heap's
    own state, whatever the threads.)"""
    program = (
        _FAULTS
        + """
    import torch
    from forge.verifier.worker.timing.heap_room import prefault_heap
    x, y = torch.randn(16 << 20), torch.randn(16 << 20)
    prefault_heap([[x, y]])
    for _ in range(3):
        print(faults(lambda: torch.mul(x, y)))
    """
    )
    assert all(n >= 16_384 for n in _printed_counts(program, threads=2))


_HEAP_PROGRAM = """
    import torch
    from forge.verifier.worker.timing import heap_room
    heap_room.prefault_heap([[torch.ones(8 << 20, dtype=torch.uint8)]])  # room: 3 x 8 MiB + 64 MiB
    libc = heap_room._libc()
    before = libc.mapped_blocks()
    libc.malloc(32 << 20)
    print(libc.mapped_blocks() - before)
"""


def test_after_the_room_no_heap_chunk_serves_a_request_of_the_threshold():
    """glibc serves a request from a free heap chunk large enough before it maps one: after the
    room, a 32 MiB request is mapped (glibc's count of mapped blocks goes up by one)."""
    assert _printed_counts(_HEAP_PROGRAM) == [1]


def test_the_room_serves_outputs_just_under_the_threshold_without_faults():
    """A 30 MiB output (above the 24 MiB blocks the room was once made of) lands in the room, on
    resident pages, each call."""
    program = (
        _UNTOUCHED
        + """
    import torch
    from forge.verifier.worker.timing.heap_room import prefault_heap
    prefault_heap([[torch.ones(8 << 20, dtype=torch.uint8)]])
    for mib in (16, 30, 30, 16):
        out = torch.empty(mib << 20, dtype=torch.uint8)
        print(untouched(out))
        out.fill_(1)
        del out
    """
    )
    pages = _printed_counts(program)
    assert len(pages) == 4 and all(n < 64 for n in pages), f"pages never touched, a call: {pages}"


@counts_small_pages
def test_a_free_heap_chunk_that_could_serve_a_threshold_sized_request_is_held():
    """Free heap space of 60 MiB (three touched 20 MiB blocks freed together) would serve a 40 MiB
    output without a fault; held, the output is mapped and faults in as in a user's loop."""
    program = (
        _FAULTS
        + """
    import torch
    from forge.verifier.worker.timing import heap_room
"""
        + _FREED
        + """
    free_touched_blocks(3)
    print(faults(lambda: torch.empty(40 << 20, dtype=torch.uint8).fill_(1)))
    print(heap_room.hold_large_chunks(32 << 20))
    print(faults(lambda: torch.empty(40 << 20, dtype=torch.uint8).fill_(1)))
    """
    )
    before, held, after = _printed_counts(program)
    assert before < 64, f"the free space did not serve the output before ({before} faults): the test shows nothing"
    assert held >= 1 and after >= 10_240


_BATCHES_PROGRAM = (
    _UNTOUCHED
    + """
    import torch
    from forge.verifier.machine.memory import release_free_memory, resident_bytes
    from forge.verifier.worker.timing import heap_room
    sets = [[torch.ones(8 << 20, dtype=torch.uint8)]]
    before = resident_bytes()
    heap_room.prefault_heap(sets)
    once = resident_bytes()
    for _ in range(4):  # four more batches, the heap trimmed before them as between phases
        release_free_memory()
        heap_room.prefault_heap(sets)
    print((once - before) >> 20, (resident_bytes() - before) >> 20)
    libc = heap_room._libc()
    mapped, heap = libc.mapped_blocks(), libc.heap_bytes()
    # 30 MiB: only the room serves it (a 16 MiB one may land in another free chunk a trim emptied)
    out = torch.empty(30 << 20, dtype=torch.uint8)
    print(untouched(out))
    # where it landed, for the message: mapped on its own, the heap grown, its offset from the first pin
    offset = out.data_ptr() - min(heap_room._KEPT)
    print(libc.mapped_blocks() - mapped, (libc.heap_bytes() - heap) >> 20, offset >> 20)
"""
)


# the room touched again as on a kernel before 5.14, which refuses MADV_POPULATE_WRITE (mlock does it)
_NO_POPULATE = """
    from forge.verifier.worker.timing import heap_room as _room_kernel
    _room_kernel._MADV_POPULATE_WRITE = -1
"""
kernels = pytest.mark.parametrize("kernel_prefix", ["", _NO_POPULATE], ids=["populated", "locked"])


@kernels
def test_later_batches_touch_the_same_room_again_and_grow_it_by_nothing(kernel_prefix: str):
    """The room lives as long as the worker: each batch touches its free parts again (a trim
    handed their pages back) instead of taking new blocks past them, which freed parts a few KiB too
    small to serve, so the heap grew by a room a batch. A 30 MiB output after them lands in the
    room, touched."""
    once, after, pages, mapped, grown_mib, offset_mib = _printed_counts(kernel_prefix + _BATCHES_PROGRAM)
    assert 64 <= once < 160 and once - 16 < after < once + 16, f"one room {once} MiB, five {after} MiB"
    where = f"mapped blocks +{mapped}, heap +{grown_mib} MiB, {offset_mib} MiB past the room's first pin"
    assert pages < 64, f"{pages} of a 30 MiB output's 7,680 pages were never touched ({where})"


_CARVED_PROGRAM = (
    _UNTOUCHED
    + """
    import torch
    from forge.verifier.machine.memory import release_free_memory
    from forge.verifier.worker.timing import heap_room
    sets = [[torch.ones(8 << 20, dtype=torch.uint8)]]
    heap_room.prefault_heap(sets)
    # 1 MiB, kept: the heap's only free chunks that large are the room's parts, so it is carved from one
    carved = heap_room._libc().malloc(1 << 20)
    (part,) = [part for part in heap_room._ROOM if part.start <= carved < part.start + part.size]
    release_free_memory()
    print(untouched_at(part.start, part.size))  # what the trim handed back
    heap_room.prefault_heap(sets)
    print(*(untouched_at(part.start, part.size) for part in heap_room._ROOM))
"""
)


@kernels
def test_a_part_of_the_room_something_was_carved_from_is_touched_again(kernel_prefix: str):
    """A block kept from a part's start leaves it smaller than a request of the part's size: touched
    again by such a request, it was missed (the request was served elsewhere) and stayed as the trim
    left it, and a 30 MiB output landed there and faulted in every page (a CI run). Each part's
    pages are resident after the next batch, whatever was carved from it."""
    trimmed, *pages = _printed_counts(kernel_prefix + _CARVED_PROGRAM)
    assert trimmed > 1024, f"the trim handed back {trimmed} pages of the carved part: the test shows nothing"
    assert len(pages) >= 2 and all(n < 4 for n in pages), f"pages never touched, a part: {pages}"


_HELD_PAGES_PROGRAM = (
    """
    from forge.verifier.machine.memory import resident_bytes
    from forge.verifier.worker.timing import heap_room
"""
    + _FREED
    + """
    free_touched_blocks(4)
    before = resident_bytes()
    print(heap_room.hold_large_chunks(32 << 20), (before - resident_bytes()) >> 20)
"""
)


def test_a_held_chunk_keeps_its_address_space_and_hands_back_its_pages():
    """80 MiB touched and freed, then held as threshold-sized chunks: the process's resident size
    falls by what is held (it kept it before, and a worker's peak rose past its limit on CI)."""
    held, released_mib = _printed_counts(_HELD_PAGES_PROGRAM)
    assert held >= 2 and released_mib >= 32 * held - 8
