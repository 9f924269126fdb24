"""Copies and facts of a candidate's outputs, taken in its worker: plain copies (a tensor
subclass's own methods never run), the timed outputs' pool, bitwise comparison, and whether an
output's storage is real and apart from the inputs'. The parent judges what they say."""

from __future__ import annotations

from typing import Any

import torch


def ranges_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        sa, sb = a.untyped_storage(), b.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return False
    pa, pb = sa.data_ptr(), sb.data_ptr()
    return pa < pb + sb.nbytes() and pb < pa + sa.nbytes() and sa.nbytes() > 0 and sb.nbytes() > 0


def storage_ok(o: torch.Tensor) -> bool:
    try:
        return (
            o.layout == torch.strided and o.device.type != "meta" and o.untyped_storage().data_ptr() != 0
        ) or o.numel() == 0
    except (RuntimeError, NotImplementedError):
        return False


def plain_copy(o: Any) -> torch.Tensor | None:
    base = _plain_copy_source(o)
    try:
        return None if base is None else base.clone()
    except Exception:
        return None


class OutputPool:
    """Copies of timed outputs, kept in a few large buffers of their own.

    A copy made with ``clone()`` would sit right after the output it copies, so the freed output
    leaves a hole exactly its size, which the next call's (aligned) output does not fit in: every
    timed call would get fresh memory and be timed with its page faults. Chunks above glibc's mmap
    threshold (the workers set it to 32 MiB) stay out of the heap the outputs come from.
    """

    _CHUNK = 64 << 20

    def __init__(self) -> None:
        self.chunk: torch.Tensor | None = None
        self.used = 0

    def copy(self, o: Any) -> torch.Tensor | None:
        t = _plain_copy_source(o)
        if t is None or t.device.type != "cpu" or t.numel() == 0 or t.is_sparse or t.is_quantized:
            return plain_copy(o)
        n = t.numel() * t.element_size()
        if self.chunk is None or self.used + n > self.chunk.numel():
            self.chunk, self.used = torch.empty(max(self._CHUNK, n), dtype=torch.uint8), 0
        dst = self.chunk[self.used : self.used + n].view(t.dtype).view(t.shape)
        self.used += -(-n // 64) * 64
        dst.copy_(t)
        return dst


def _plain_copy_source(o: Any) -> torch.Tensor | None:
    """The output as a plain tensor (a subclass's own methods never run), or None."""
    if not isinstance(o, torch.Tensor):
        return None
    try:
        return o.detach() if type(o) is torch.Tensor else o.detach().as_subclass(torch.Tensor)
    except Exception:
        return None


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    ac, bc = a.detach().contiguous(), b.detach().contiguous()
    return bool(torch.equal(ac.reshape(-1).view(torch.uint8), bc.reshape(-1).view(torch.uint8))) if ac.numel() else True


def same_now(o: torch.Tensor, snapshot: torch.Tensor) -> bool:
    now = plain_copy(o)
    return now is not None and bitwise_equal(now, snapshot)


__all__ = ["OutputPool", "bitwise_equal", "plain_copy", "ranges_overlap", "same_now", "storage_ok"]
