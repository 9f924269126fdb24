"""The heap room a CPU worker makes before its timed calls, shaped as a user's process has it.

A tensor below the allocator's mmap threshold comes from the heap, and in a user's loop its
memory was touched by the calls before (glibc keeps freed memory up to its trim threshold): the
room gives the timed calls that too. A tensor at or above the threshold is, in a user's process,
mapped fresh by every call, and its first touch (a page fault per 4 KiB, the kernel zeroing each
page) is part of what the user's loop times: 16,385 faults and ~10 ms a call for a 64 MiB output
on a 2-core VM, where the same kernel writing touched memory takes ~7 ms. glibc serves any
request from a free heap chunk large enough before it maps one, so a room freed as one block
served those outputs too: the rounds' figures read the kernel without its faults (3-4 ms for a
SwiGLU whose user's loop read 15 ms), and which calls faulted depended on what else the heap held.
So the room is freed as blocks under the threshold, each pinned apart from the next by a small
allocation kept for the process's life, and any free chunk that could still serve a request of
the threshold's size is held (``hold_large_chunks``): such requests are then mapped, as in a
user's loop.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from typing import Any

import torch

from forge.verifier.memory import MMAP_THRESHOLD_BYTES, resident_bytes

_PIN_BYTES = 4096
# the fallback's blocks (not glibc: torch's tensors, freed whole), under the 32 MiB threshold
_TENSOR_BLOCK_BYTES = 24 << 20
_MOST_HELD = 64  # free chunks held at most (each is address space; its pages were handed back or kept anyway)
_KEPT: list[int] = []  # the pins and held chunks, for the process's life (never freed: see the module's doc)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _libc() -> ctypes.CDLL | None:
    """glibc with ``mallinfo2`` (2.33 and later); None elsewhere (no room is shaped)."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _MallInfo2
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        libc.realloc.restype = ctypes.c_void_p
        libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


def mmap_threshold() -> int:
    """The allocator's mmap threshold in this process: the workers set it (``worker_env``)."""
    try:
        return int(os.environ.get("MALLOC_MMAP_THRESHOLD_", MMAP_THRESHOLD_BYTES))
    except ValueError:
        return MMAP_THRESHOLD_BYTES


def hold_large_chunks(threshold: int) -> int:
    """Allocate ``threshold`` bytes again and again while the allocator serves them from the heap
    (a free chunk, or the top of the heap, at least that large), keeping each: after it, a request
    that large is mapped fresh, as in a user's process. Returns how many were held."""
    libc = _libc()
    if libc is None:
        return 0
    held = 0
    while held < _MOST_HELD:
        mapped_before = libc.mallinfo2().hblks
        pointer = libc.malloc(threshold)
        if not pointer:
            break
        if libc.mallinfo2().hblks > mapped_before:  # mapped on its own: no heap chunk holds it
            libc.free(pointer)
            break
        _KEPT.append(pointer)
        held += 1
    return held


def prefault_heap(sets: Sequence[Sequence[Any]], budget: int | None = None) -> None:
    """Fill the process heap with touched memory (three times the input sets' tensors that come
    from the heap, plus 64 MiB), then free it (CPU workers, before each timed loop).

    A new output that lands on memory never touched (fresh space at the top of the heap) takes its
    first-touch page faults inside the timed call (~1 ms per 4 MB on a VM: 10x a memory-bound
    kernel). The room is grown in blocks just under the 32 MiB mmap threshold the workers set, so
    they come from the heap, each parted from the next by a pin (see the module's doc); the total stays
    under the 1 GiB trim threshold, so freeing it does not hand it back. ``budget``: the bytes
    this process may hold (``memory.budget_bytes``); the room grown stays within what is left of it.

    Holes in the middle of the heap whose pages ``memory.release_free_memory`` handed back are
    mostly not touched by blocks this large, and an output that lands in one faults in once. So
    the workers trim once, before the first timing batch, not before every batch: the warm-up
    calls take those faults, and later batches find the holes touched (trimmed before every batch,
    a 16 MB output faulted in on about 1 timed call in 10, on either side). Filling the holes too,
    with 1 MiB and 64 KiB blocks, removed those faults but made the reference worker's eager calls
    systematically slower than the same code in the candidate worker: the reference timed against
    itself read 1.13-1.51x (residual_rmsnorm) and 1.10-1.37x (row_sum) at 60 calls a side, against
    0.84-1.03x and 1.03-1.12x with 24 MiB blocks (2-core VM, benchmarks.claims.timing_stability --null).
    A fault now and then widens both sides' spread; a bias would accept kernels that are not faster.
    """
    # Tensors at or above the mmap threshold are mapped fresh by every call (on both sides alike):
    # room for them would only add to the peak (1 GiB inputs: +0.7 GiB a worker).
    threshold = mmap_threshold()
    sizes = [x.numel() * x.element_size() for s in sets for x in s]
    nbytes = 3 * sum(n for n in sizes if n < threshold) + (64 << 20)
    if budget is not None:
        nbytes = min(nbytes, budget - resident_bytes() - (64 << 20))
    _make_room(max(0, min(nbytes, 768 << 20)), threshold)
    hold_large_chunks(threshold)


def room_block_bytes(threshold: int) -> int:
    """A room block's size: just under the threshold, so the free part of one (the block less its
    pin) serves any request below the threshold but a few KiB (torch asks glibc for 64-byte
    aligned memory, which takes a chunk some bytes larger than the tensor) and none at or above it."""
    return max(threshold - 2 * _PIN_BYTES, 4 * _PIN_BYTES)


def _make_room(nbytes: int, threshold: int) -> None:
    """Blocks of ``nbytes`` in all touched, then each shrunk in place to its first few bytes: the
    rest of each is free, and the part kept (a pin) parts it from the next block's free space."""
    libc = _libc()
    if libc is None:  # not glibc: the room as blocks freed whole (that allocator's own rules)
        blocks = [torch.zeros(_TENSOR_BLOCK_BYTES, dtype=torch.uint8) for _ in range(-(-nbytes // _TENSOR_BLOCK_BYTES))]
        del blocks
        return
    block = room_block_bytes(threshold)
    pointers = [libc.malloc(block) for _ in range(-(-nbytes // block))]  # whole blocks, rounded up
    for pointer in pointers:
        if pointer:
            ctypes.memset(pointer, 0, block)
    for pointer in pointers:
        if pointer:
            _KEPT.append(libc.realloc(pointer, _PIN_BYTES))  # shrunk where it is; the rest freed
