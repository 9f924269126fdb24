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

So the room is made of blocks just under the threshold, each shrunk in place to a small pin at
its start (``realloc``), which parts its free rest from the next block's; an untouched block after
the last keeps the room's end from joining the top of the heap. The room stays for the process's
life: a later batch has the kernel populate its parts' pages again (the trim between phases hands
them back; populating keeps whatever the heap has put there since) and grows it only by what it
lacks. Then any free chunk that could still serve a request of the threshold's size is held
(``hold_large_chunks``, again after the warm-up calls): such requests are then mapped, as in a
user's loop.
"""

from __future__ import annotations

import ctypes
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from forge.verifier.machine.memory import mmap_threshold, resident_bytes

_PIN_BYTES = 4096
# the fallback's blocks (not glibc: torch's tensors, freed whole), under the 32 MiB threshold
_TENSOR_BLOCK_BYTES = 24 << 20
_MOST_HELD = 2  # chunks held a call at most: 32 MiB of heap each, which the memory limit (RLIMIT_DATA) counts
_KEPT: list[int] = []  # pins, fences and held chunks, for the process's life (see the module's doc)


@dataclass(frozen=True)
class _RoomPart:
    """One block's free rest: where it starts and the request size it serves whole."""

    start: int
    size: int


_ROOM: list[_RoomPart] = []  # the room's free parts made so far


class _MallInfo(ctypes.Structure):
    """glibc's ``mallinfo``: ``hblks`` is the count of blocks mapped on their own."""

    _fields_ = [
        (name, ctypes.c_int)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


class _MallInfo2(ctypes.Structure):
    """glibc's ``mallinfo2`` (2.33 and later): the same fields, as size_t."""

    _fields_ = [(field[0], ctypes.c_size_t) for field in _MallInfo._fields_]


class _Libc:
    """The process's glibc: malloc, realloc, free, and the count of blocks mapped on their own."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        lib.malloc.restype, lib.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
        lib.realloc.restype, lib.realloc.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t]
        lib.free.restype, lib.free.argtypes = None, [ctypes.c_void_p]
        try:
            lib.mallinfo2.restype = _MallInfo2
            self._info: Any = lib.mallinfo2
        except AttributeError:  # glibc before 2.33: mallinfo's int fields hold a count of blocks fine
            lib.mallinfo.restype = _MallInfo
            self._info = lib.mallinfo

    def mapped_blocks(self) -> int:
        return int(self._info().hblks)

    def heap_bytes(self) -> int:
        return int(self._info().arena)

    def malloc(self, size: int) -> int:
        return int(self.lib.malloc(size) or 0)


def _libc() -> _Libc | None:
    """glibc; None elsewhere (musl, another allocator: the room is made of tensors freed whole)."""
    try:
        lib = ctypes.CDLL(None)
    except OSError:
        return None
    return _Libc(lib) if hasattr(lib, "mallinfo") else None  # glibc's, where the others have none


def hold_large_chunks(threshold: int | None = None) -> int:
    """Allocate ``threshold`` bytes (the process's mmap threshold by default) again and again while
    the allocator serves them from the heap (a free chunk, or the top of the heap, at least that
    large), keeping each: after it, a request that large is mapped fresh, as in a user's process.
    Returns how many were held."""
    libc = _libc()
    if libc is None:
        return 0
    size = threshold or mmap_threshold()
    held = 0
    while held < _MOST_HELD:
        mapped_before, heap_before = libc.mapped_blocks(), libc.heap_bytes()
        pointer = libc.malloc(size)
        if not pointer:
            break
        # mapped on its own (no heap chunk holds it), or the heap grown for it (where a memory
        # limit refused the mapping): no free space was there to hold
        if libc.mapped_blocks() > mapped_before or libc.heap_bytes() > heap_before:
            libc.lib.free(pointer)
            break
        _release_pages(libc, pointer, size)
        _KEPT.append(pointer)
        held += 1
    return held


_PAGE = 4096
_MADV_DONTNEED = 4
_MADV_POPULATE_WRITE = 23


def _whole_pages(pointer: int, size: int) -> tuple[int, int]:
    """The pages wholly inside ``size`` bytes at ``pointer``: their start and end (empty when
    ``end <= start``)."""
    return -(-pointer // _PAGE) * _PAGE, (pointer + size) // _PAGE * _PAGE


def _release_pages(libc: _Libc, pointer: int, size: int) -> None:
    """Hand back the pages inside a held chunk (as ``malloc_trim`` does for a free one): it holds
    address space only, so memory freed there by an earlier phase does not stay resident (a
    candidate's worker peaked 26 MiB over its limit on a CI run where held chunks kept their pages)."""
    start, end = _whole_pages(pointer, size)
    if end > start:
        libc.lib.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_DONTNEED)


def prefault_heap(sets: Sequence[Sequence[Any]], budget: int | None = None) -> None:
    """Make the room (three times the input sets' tensors that come from the heap, plus 64 MiB)
    touched and free (CPU workers, before each timing batch).

    A new output that lands on memory never touched (fresh space at the top of the heap) takes its
    first-touch page faults inside the timed call (~1 ms per 4 MB on a VM: 10x a memory-bound
    kernel). The room's blocks are just under the 32 MiB mmap threshold the workers set, so they
    come from the heap, each parted from the next by a pin (see the module's doc); the total stays
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
    nbytes = max(0, min(nbytes, 768 << 20))
    libc = _libc()
    if libc is None:  # not glibc: the room as blocks freed whole (that allocator's own rules)
        blocks = [torch.zeros(_TENSOR_BLOCK_BYTES, dtype=torch.uint8) for _ in range(-(-nbytes // _TENSOR_BLOCK_BYTES))]
        del blocks
        return
    _touch_room(libc, nbytes, threshold)
    hold_large_chunks(threshold)


def room_block_bytes(threshold: int) -> int:
    """A room block's size: just under the threshold, so the free part of one (the block less its
    pin) serves any request below the threshold but a few KiB (torch asks glibc for 64-byte
    aligned memory, which takes a chunk some bytes larger than the tensor) and none at or above it."""
    return max(threshold - 2 * _PIN_BYTES, 4 * _PIN_BYTES)


def _touch_room(libc: _Libc, nbytes: int, threshold: int) -> None:
    """The room's free parts made so far touched again, then new blocks for what the room still
    lacks of ``nbytes``."""
    block = room_block_bytes(threshold)
    for part in _ROOM:
        _touch_part(libc, part)
    lacking = nbytes - len(_ROOM) * block
    if lacking > 0:
        _grow_room(libc, -(-lacking // block), block)


def _touch_part(libc: _Libc, part: _RoomPart) -> None:
    """The part's pages made resident with their contents kept: whatever the heap has put in the
    part since it was made stays as it was, and nothing is written, so no other thread's write to
    it is lost. (Touched by a request of the part's size, as before, a part that a small block had
    been carved from was too small for it: the request was served elsewhere, the part stayed as
    the trim left it, and a 30 MiB output landed there and faulted in all its 7,680 pages.) The
    kernel populates them (MADV_POPULATE_WRITE, Linux 5.14); before 5.14, ``mlock`` does, a slice
    at a time within the process's lock limit, each unlocked at once. A range no longer mapped
    fails both: it is left as it is."""
    start, end = _whole_pages(part.start, part.size)
    if end <= start:
        return
    if libc.lib.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_POPULATE_WRITE) == 0:
        return
    # mlock faults in a private writable mapping's pages as writes do (breaking copy-on-write)
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    step = end - start if soft == resource.RLIM_INFINITY else max(_PAGE, soft // _PAGE * _PAGE)
    for at in range(start, end, step):
        size = ctypes.c_size_t(min(step, end - at))
        if libc.lib.mlock(ctypes.c_void_p(at), size) != 0:
            return
        libc.lib.munlock(ctypes.c_void_p(at), size)


def _heap_block(libc: _Libc, size: int) -> int:
    """``size`` bytes from the heap, or 0: a block the allocator maps on its own (a process whose
    threshold has not risen that far: not a worker, which sets it) is freed at once, as shrunk or
    kept it would be no part of the heap."""
    mapped_before = libc.mapped_blocks()
    pointer = libc.malloc(size)
    if pointer and libc.mapped_blocks() > mapped_before:
        libc.lib.free(pointer)
        return 0
    return pointer


def _grow_room(libc: _Libc, count: int, block: int) -> None:
    """``count`` blocks from the heap touched, then each shrunk in place to its pin (the rest
    freed), and an untouched block after them, kept, so the last one's free rest does not join the
    top of the heap."""
    pointers: list[int] = []
    while len(pointers) < count and (pointer := _heap_block(libc, block)):
        pointers.append(pointer)  # the first block mapped apart (or refused) ends them: the rest would be too
    if not pointers:
        return
    fence = _heap_block(libc, block)  # address space only: never touched
    if fence:
        _KEPT.append(fence)
    for pointer in pointers:
        ctypes.memset(pointer, 0, block)
    for pointer in pointers:
        _KEPT.append(int(libc.lib.realloc(pointer, _PIN_BYTES) or 0))  # shrunk where it is; the rest freed
        # a request this size fits the freed rest, whatever its header
        _ROOM.append(_RoomPart(start=pointer + _PIN_BYTES, size=block - 2 * _PIN_BYTES))
