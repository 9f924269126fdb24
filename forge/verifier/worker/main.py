"""Worker entry point: ``python -m forge.verifier.worker.main (reference|candidate) FD``.

The clocks are bound here, first thing, before torch or any candidate code is imported, so a
candidate that patches ``time.perf_counter`` or ``torch.cuda.Event.elapsed_time`` changes names
nobody here reads; the patch is also reported (``clock_tampering``) and the parent cross-checks
the timings against its own wall clock.
"""

from __future__ import annotations

import time as _time

_HOST_NS = _time.perf_counter_ns
_TIME_FUNCS = {
    n: getattr(_time, n)
    for n in (
        "perf_counter",
        "perf_counter_ns",
        "time",
        "time_ns",
        "monotonic",
        "monotonic_ns",
        "process_time",
        "process_time_ns",
    )
}

import os  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

if TYPE_CHECKING:  # imported at run time only once the clocks are bound (above)
    from forge.verifier.protocol.channel import Channel
    from forge.verifier.worker.candidate_side import CandidateSide
    from forge.verifier.worker.reference_side import ReferenceSide


def _device_wait(torch: Any) -> Any:
    """About half a millisecond of device-side work for the timed loop to hide launches behind:
    a spin kernel (1M cycles: 0.5 ms at 2 GHz, longer at lower clocks), or flushes where torch has none."""
    spin = getattr(torch.cuda, "_sleep", None)
    if spin is not None:
        return lambda: spin(1_000_000)
    pad = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")

    def flushes() -> None:
        for _ in range(40):
            pad.zero_()

    return flushes


def _setup_torch(device: str, threads: int) -> tuple[Any, Any]:
    import torch

    from forge.verifier.worker.timing.worker_loop import Clocks

    torch.set_num_threads(threads)
    if device == "cuda":
        cuda_funcs = {
            "torch.cuda.synchronize": torch.cuda.synchronize,
            "torch.cuda.Event.record": torch.cuda.Event.record,
            "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        }
        clocks = Clocks(
            host_ns=_HOST_NS,
            sync=torch.cuda.synchronize,
            event_cls=torch.cuda.Event,
            record=torch.cuda.Event.record,
            elapsed=torch.cuda.Event.elapsed_time,
            cover=_device_wait(torch),
        )
        props = torch.cuda.get_device_properties(0)
        buf = torch.empty(max(2 * getattr(props, "L2_cache_size", 50 << 20), 256 << 20) // 4, device="cuda")
        flush = buf.zero_
    else:
        from forge.verifier.machine.facts import cpu_flush_bytes

        cuda_funcs = {}
        clocks = Clocks(host_ns=_HOST_NS, sync=lambda: None)
        # Reading a buffer twice the LLC evicts the inputs and writes back whatever the last call
        # left dirty, all before the clock starts. A flush that wrote its buffer would leave the
        # cache full of dirty lines, whose write-back would then be timed inside the next call
        # (measured: +10-20% on a 32 MB memory-bound op, with a wider spread).
        buf = torch.ones(cpu_flush_bytes() // 4)
        flush = buf.sum
        torch.ones(1 << 20).sum()  # start torch's thread pool now, not during the first case

    def clock_check() -> list[str]:
        bad = [f"time.{n}" for n, f in _TIME_FUNCS.items() if getattr(_time, n) is not f]
        if _time.perf_counter_ns is not _HOST_NS or clocks.host_ns is not _HOST_NS:
            bad.append("forge's bound clock")
        for name, f in cuda_funcs.items():
            owner: Any = torch
            for part in name.split(".")[1:-1]:
                owner = getattr(owner, part)
            if getattr(owner, name.rsplit(".", 1)[1]) is not f:
                bad.append(name)
        return sorted(set(bad))

    return clocks, (flush, clock_check)


def _memory_hint(message: str) -> str:
    if "allocate memory" not in message and "MemoryError" not in message:
        return ""
    limit = os.environ.get("FORGE_WORKER_MEMORY_MB", "?")
    return (
        f"\n(each verification worker may use {limit} MiB: raise it with --memory-limit or "
        "FORGE_MEMORY_LIMIT_MB, or make the op's sizes smaller)"
    )


def main(argv: list[str]) -> int:
    role, fd = argv[0], int(argv[1])
    sock = socket.socket(fileno=fd)
    from forge.core.sandbox import SandboxError, enter_from_env
    from forge.verifier.protocol.channel import Channel

    chan = Channel(sock)
    try:  # a forked worker: before a thread starts, before the candidate is imported (an exec'd
        # one entered it in ``forge.core.sandbox.entry``, before torch's import started a thread)
        enter_from_env()
    except SandboxError as exc:
        from forge.verifier.protocol import HelloReply

        chan.send(HelloReply(error=str(exc)).wire())
        return 2
    threads = int(os.environ.get("FORGE_WORKER_THREADS", "1"))
    import torch

    from forge.core.errors import UsageError
    from forge.verifier.machine.facts import resolve_device
    from forge.verifier.protocol import HelloReply

    try:
        device = resolve_device(os.environ.get("FORGE_WORKER_DEVICE", "auto"))
    except UsageError as exc:
        chan.send(HelloReply(error=exc.message).wire())
        return 2
    if device == "cpu":
        # Triton kernels run on CPU tensors only under its interpreter (correct, not fast).
        os.environ["TRITON_INTERPRET"] = "1"
    clocks, (flush, clock_check) = _setup_torch(device, threads)

    from forge.verifier.worker.candidate_side import CandidateSide

    side: CandidateSide | ReferenceSide
    if role == "reference":
        from forge.verifier.worker.reference_side import ReferenceSide

        side = ReferenceSide(device, clocks, flush)
    else:
        side = CandidateSide(device, clocks, flush, clock_check)
    capability = None
    if device == "cuda":
        major, minor = torch.cuda.get_device_capability(0)
        capability = f"{major}.{minor}"
    # /proc is the host's: its "self" is this process's id out there, where os.getpid() gives the
    # one in a PID namespace of the sandbox's
    chan.send(HelloReply(pid=int(os.readlink("/proc/self")), device=device, capability=capability).wire())
    return _serve(chan, side)


def _serve(chan: Channel, side: CandidateSide | ReferenceSide) -> int:
    """Answer the parent's requests until it closes the channel or asks this worker to exit."""
    from forge.core.errors import ProblemError
    from forge.verifier.protocol import (
        ErrorReply,
        ExitRequest,
        MalformedMessage,
        Message,
        ProblemErrorReply,
        TickReply,
        parse_request,
    )
    from forge.verifier.protocol.channel import ChannelClosed
    from forge.verifier.worker.candidate_side import StageError

    tick = TickReply().wire()
    while True:
        try:
            request = parse_request(chan.recv())
        except ChannelClosed:
            return 0
        except MalformedMessage as exc:  # the parent is forge: a request it cannot send is a bug
            chan.send(ErrorReply(stage="internal", message=f"malformed request: {exc}").wire())
            continue
        if isinstance(request, ExitRequest):
            sys.stdout.flush()
            os._exit(0)  # no interpreter teardown: the parent is waiting to time the other side
        reply: Message
        try:
            reply = side.answer(request, lambda: chan.send(tick))
        except ProblemError as exc:
            reply = ProblemErrorReply(message=exc.message + _memory_hint(exc.message))
        except StageError as exc:
            reply = ErrorReply(stage=exc.stage, message=exc.message)
        except MemoryError as exc:
            reply = ErrorReply(stage="memory", message=f"MemoryError: {exc}")
        except Exception as exc:  # a bug on forge's side of the worker, reported as such
            import traceback

            reply = ErrorReply(stage="internal", message=traceback.format_exc()[-3000:])
            del exc
        chan.send(reply.wire())
        # Dropped now, not when the next request replaces them: with 1 GiB inputs a case's request
        # and reply held while the next one arrives were gigabytes of this worker's peak.
        del request, reply
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
