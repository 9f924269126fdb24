"""Speed-of-light estimate: bytes the op must move and FLOPs it must do, against the machine.

FLOPs are counted for the matmul and convolution families (the ops whose peak the machine's
figures measure); the elements that pass through a transcendental function (exp, log, tanh, erf,
and the activations and softmaxes made of them) are counted apart: tens of cycles each where a
multiply-add is one, they can bound an op the bytes say is memory-bound, and no measured peak
prices them, so the bound leaves them out and the agents are told the count.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from forge.core.roofline_record import Roofline, memory_s
from forge.verifier.machine.figures import MachineFigures
from forge.verifier.machine.memory import mmap_threshold
from forge.verifier.worker.call_form import invoke
from forge.verifier.worker.op_work.needed_matmul import unneeded_flops
from forge.verifier.worker.op_work.passes import Reread, RereadTracer, reread_bytes

aten = torch.ops.aten


def _numel(shape: Any) -> int:
    return math.prod(int(s) for s in shape)


# aten ops that evaluate a transcendental function (or one made of them) once per output element
_TRANSCENDENTAL = frozenset(
    getattr(aten, name)
    for name in (
        "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "tanh", "sigmoid", "erf", "erfc", "erfinv",
        "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh",
        "pow", "gelu", "silu", "mish", "softplus", "elu", "selu", "celu", "logit", "lgamma", "digamma",
        "_softmax", "_log_softmax", "logsumexp", "logaddexp", "xlogy", "special_xlog1py",
    )
    if hasattr(aten, name)
)  # fmt: skip

_PRODUCTS = frozenset((aten.mm, aten.addmm, aten.bmm, aten.baddbmm))
# the fused attentions torch's scaled_dot_product_attention dispatches to: two matmuls each
_ATTENTION = frozenset(
    getattr(aten, name)
    for name in (
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable",
    )
    if hasattr(aten, name)
)  # fmt: skip


class FlopCounter(TorchDispatchMode):
    """Counts multiply-add FLOPs (2 per MAC) of the aten calls made under it, of them those a fused
    attention's mask or causal flag lets a kernel skip (``masked_flops``), and the elements that
    pass through a transcendental function."""

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0
        self.masked_flops = 0
        self.product_flops = 0  # of ``flops``, the mm/bmm/addmm/baddbmm calls' (``needed_matmul`` reads those)
        self.transcendentals = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in a dynamo-disable whose first call imports
        # torch._dynamo (~2.3 s of CPU in every reference worker, while the candidate runs its
        # cases). Nothing is compiled under this counter, so there is nothing to disable.
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        packet = getattr(func, "overloadpacket", None)
        with contextlib.suppress(IndexError, TypeError, AttributeError, KeyError):
            found = _flops(packet, args, out)
            self.flops += found
            if packet in _PRODUCTS:
                self.product_flops += found
            if packet in _ATTENTION:
                counted, masked = attention_flops(func, args, kwargs or {})
                self.flops, self.masked_flops = self.flops + counted, self.masked_flops + masked
        if packet in _TRANSCENDENTAL and isinstance(out, torch.Tensor) and not _polynomial_pow(packet, args):
            self.transcendentals += out.numel()
        return out


def _polynomial_pow(packet: Any, args: Any) -> bool:
    """A power a kernel computes with multiplies, a division or a square root (``x.pow(2)``, an
    RMSNorm's; ``x ** -1``, ``x ** 0.5``), not with an exp and a log: no transcendental."""
    if packet is not aten.pow or len(args) < 2 or isinstance(args[1], torch.Tensor):
        return False
    exponent = float(args[1])
    return abs(exponent) <= 4 and (exponent.is_integer() or abs(exponent) == 0.5)


def _flops(packet: Any, args: Any, out: Any) -> int:
    return int(_macs_x2(packet, args, out))


def _macs_x2(packet: Any, args: Any, out: Any) -> Any:
    if packet in (aten.mm, aten.addmm):
        a, b = (args[0], args[1]) if packet is aten.mm else (args[1], args[2])
        return 2 * a.shape[0] * a.shape[1] * b.shape[1]
    if packet in (aten.bmm, aten.baddbmm):
        a, b = (args[0], args[1]) if packet is aten.bmm else (args[1], args[2])
        return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if packet is aten.convolution:
        w = args[1]
        groups = int(args[8]) if len(args) > 8 else 1
        # weight is (C_out, C_in / groups, *kernel): each output element needs C_in/groups * kernel MACs
        del groups
        return 2 * _numel(out.shape) * w.shape[1] * _numel(w.shape[2:])
    return 0


def attention_flops(func: Any, args: Any, kwargs: dict[str, Any]) -> tuple[int, int]:
    """(FLOPs, of them masked) of a fused attention call: a query row's dot product with each key
    and its weighted sum of each value; masked, the pairs its causal flag or mask removes (a
    boolean mask's False, a float mask's -inf), which a kernel need not compute."""
    named = dict(zip((a.name for a in func._schema.arguments), args, strict=False))  # the rest by default
    named.update(kwargs)
    q, k, v = named["query"], named["key"], named["value"]
    rows, keys = _numel(q.shape[:-1]), int(k.shape[-2])
    counted = 2 * rows * keys * (int(q.shape[-1]) + int(v.shape[-1]))
    kept = 1.0
    if named.get("is_causal"):
        length = int(q.shape[-2])  # torch's causal mask is the top-left triangle of (length, keys)
        kept = sum(min(i + 1, keys) for i in range(length)) / (length * keys)
    mask = named.get("attn_mask", named.get("attn_bias"))
    if isinstance(mask, torch.Tensor) and mask.numel():
        off = ~mask if mask.dtype == torch.bool else torch.isneginf(mask)
        kept *= 1.0 - float(off.float().mean())  # a mask's share is the same broadcast to every row
    return counted, round(counted * (1.0 - kept))


@dataclass(frozen=True)
class CallEstimate:
    """What one call of the op must move and do: ``bytes`` (inputs and state read, outputs
    written), ``bytes_read`` of them, the matmul ``flops`` some output needs and ``unneeded_flops``
    (counted apart: see ``needed_matmul``), elements through a transcendental function, and the
    tensors its math needs again after a reduction over them (``passes``)."""

    bytes: int
    bytes_read: int
    flops: int
    transcendentals: int
    rereads: tuple[Reread, ...] = ()
    unneeded_flops: int = 0
    fresh_bytes: int = 0  # of the bytes written, outputs the allocator maps anew every call (``fresh_output_bytes``)


def estimate(
    model: torch.nn.Module, inputs: list[Any], outputs: list[Any], other_draw: list[Any] | None = None
) -> CallEstimate:
    """The op's ``CallEstimate``, from one call of ``model`` on ``inputs`` (``outputs``: its
    outputs): parameters and buffers read once, each input read once, each output written once.
    With ``other_draw`` (a second draw of the inputs), the matmul work no output needs is found
    and left out of ``flops`` (``needed_matmul``)."""
    counter, tracer = FlopCounter(), RereadTracer()
    tracer.add_sources([*inputs, *model.state_dict().values()])
    with counter, tracer, torch.no_grad():
        invoke(model, inputs)
    read = bytes_read(model, inputs)
    nbytes = read + sum(o.numel() * o.element_size() for o in outputs)
    unneeded = counter.masked_flops
    if other_draw is not None and counter.product_flops:
        unneeded += unneeded_flops(model, [inputs, other_draw], counter.product_flops)
    unneeded = min(unneeded, counter.flops)
    needed = counter.flops - unneeded
    fresh = fresh_output_bytes(outputs, [*inputs, *model.state_dict().values()])
    return CallEstimate(nbytes, read, needed, counter.transcendentals, tracer.rereads(), unneeded, fresh)


def fresh_output_bytes(outputs: list[Any], sources: Sequence[Any] = ()) -> int:
    """The bytes of the CPU outputs' own storages at or above the allocator's mmap threshold (32 MiB
    in the workers: ``memory.mmap_threshold``): such a storage is mapped anew by every call, in a
    user's process too, and its pages are faulted in as it is written (``timing.heap_room``). A
    storage counted once however many outputs view it; none that an input or the model's state
    holds (an op that returns its input, or writes it in place, maps nothing). A GPU's caching
    allocator keeps its memory."""
    held = {s.untyped_storage().data_ptr() for s in sources if isinstance(s, torch.Tensor)}
    storages = {
        o.untyped_storage().data_ptr(): int(o.untyped_storage().nbytes())
        for o in outputs
        if isinstance(o, torch.Tensor) and o.device.type == "cpu"
    }
    threshold = mmap_threshold()
    return sum(n for pointer, n in storages.items() if pointer not in held and n >= threshold)


def bytes_read(model: torch.nn.Module, inputs: list[Any]) -> int:
    """Of ``estimate``'s bytes, those read: the inputs and the model's state."""
    found: int = sum(x.numel() * x.element_size() for x in inputs)
    state: int = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    return found + state


def bound_ms(
    nbytes: int,
    flops: int,
    bandwidth_gbs: float,
    peak_gflops: float,
    read: int | None = None,
    read_gbs: float | None = None,
) -> float:
    """The larger of the memory time (``memory_s``: with ``read`` bytes at ``read_gbs``, where the
    read bandwidth was measured) and the FLOPs at the matmul peak, in ms."""
    return max(memory_s(nbytes, read, bandwidth_gbs, read_gbs), flops / (peak_gflops * 1e9)) * 1e3


def _warm_bandwidths(nbytes: int, f: MachineFigures) -> tuple[float | None, float | None, int | None]:
    """(copy, read, the working set they were measured at) for a warm op moving ``nbytes``."""
    point = f.at_working_set(nbytes)
    if point is not None:
        return point.copy_gbs, point.read_gbs, point.bytes
    return f.cache_bandwidth_gbs, f.cache_read_bandwidth_gbs, None


def cache_holds(f: MachineFigures, llc: int | None) -> tuple[int | None, int | None]:
    """(what a cache can keep between a reduction's two reads of data that came from DRAM, what
    the fastest measured level keeps of data already in cache), in bytes; None: unknown, no second
    read counted. The first is the last-level cache's reported size (the most any cache could
    keep: the bound stays a bound where a VM's guest is told of more than its share); the second a
    CPU's smallest measured working set (the core's own cache), nothing on a GPU."""
    return llc, (f.working_sets[0].bytes if f.working_sets else None)


def record(call: CallEstimate, f: MachineFigures, llc: int | None) -> Roofline:
    """The estimate with this machine's figures and both bounds: ``bound_ms`` DRAM's (the
    verdict takes the warm one where it judges the op warm), the warm bandwidths those at the
    op's working set (``MachineFigures.at_working_set``; an older forge's figures: the last-level
    cache's) where they were measured. Each bound counts the second read of the data its math
    needs again after a reduction whose groups the cache it prices does not keep (``cache_holds``;
    ``llc``: the last-level cache's bytes, where known)."""
    dram_holds, warm_holds = cache_holds(f, llc)
    again, group = reread_bytes(call.rereads, dram_holds)
    warm_again, _ = reread_bytes(call.rereads, warm_holds)
    copy_gbs, read_gbs, working_set = _warm_bandwidths(call.bytes, f)
    roof = Roofline(
        bytes=call.bytes,
        bytes_read=call.bytes_read,
        flops=call.flops,
        unneeded_flops=call.unneeded_flops or None,
        transcendentals=call.transcendentals,
        device_name=f.device_name,
        bandwidth_gbs=f.bandwidth_gbs,
        peak_gflops=f.peak_gflops,
        read_bandwidth_gbs=f.read_bandwidth_gbs,
        cache_bandwidth_gbs=copy_gbs,
        cache_read_bandwidth_gbs=read_gbs,
        cache_working_set=working_set,
        reread_bytes=again or None,
        reread_group_bytes=group or None,
        cache_reread_bytes=warm_again or None,
        fresh_bytes=(call.fresh_bytes or None) if f.fresh_write_gbs else None,
        fresh_write_gbs=f.fresh_write_gbs if call.fresh_bytes else None,
    )
    # the bounds from the record's own memory time (its second reads counted), as ``beside_eager`` takes them
    compute_s = call.flops / (f.peak_gflops * 1e9)
    roof.bound_ms = round(max(roof.memory_s(False, f.bandwidth_gbs, f.read_bandwidth_gbs), compute_s) * 1e3, 6)
    if copy_gbs:
        roof.cache_bound_ms = round(max(roof.memory_s(True, copy_gbs, read_gbs), compute_s) * 1e3, 6)
    return roof
