"""A user loop's process: ``python -m forge.verifier.user_loop_worker REQUEST RESULT``.

Each of the loop's fresh processes does what a user's script does with a banked kernel: imports the op, builds the
reference in eval mode, imports the candidate as ``forge.kernelbank`` does (``forge_reference``
is the op's module), builds ``ModelNew`` with the reference's weights, and times it beside the
reference and ``torch.compile`` of the reference (``plain_loop``). Before the candidate is
imported, the reference is timed against a second instance of itself (the loop's null) and what a
candidate could change is noted; after the loop, what changed is reported (``tampered``). The
parent trusts none of it beyond a lower claim: the banked figure is never above the isolated
verification's.
"""

from __future__ import annotations

import copy
import sys
import traceback
from pathlib import Path

import torch

from forge.core.forward_tap import ForwardTap
from forge.core.importing import import_file
from forge.core.problem import load_problem, read_problem_source
from forge.core.statuses import TimingRegime
from forge.core.timing_records import UserLoop
from forge.verifier.machine import flush_bytes
from forge.verifier.messages import UserLoopRequest
from forge.verifier.process_watch import ProcessWatch
from forge.verifier.timing import plain_loop
from forge.verifier.timing.pairing import paired_ratio

_PROBES = 3  # untimed kernel calls watched for the reference's forward
_SLOWED = 1.5  # eager this much slower once the candidate is loaded: the candidate slowed it


def _median_ms(ns: list[int]) -> float:
    return round(sorted(ns)[len(ns) // 2] / 1e6, 6)


def _slowed(before_ns: list[int], during_ns: list[int]) -> str | None:
    """Eager slowed once the candidate was loaded, beyond the noise: even its fastest quarter of
    calls after it took ``_SLOWED`` times its slowest quarter before. Two medians of 10-60 calls
    alone read 0.7-1.6x apart on a 2-core VM with nothing loaded (a cold RMSNorm, 10 calls a side)."""
    before, during = sorted(before_ns), sorted(during_ns)
    if during[len(during) // 4] <= _SLOWED * before[(3 * len(before)) // 4]:
        return None
    b, d = _median_ms(before_ns), _median_ms(during_ns)
    slower = f"{d / b:.2f}x slower ({b} -> {d} ms, medians; every quarter of its calls)"
    return f"eager ran {slower} once the candidate was loaded"


def measure(req: UserLoopRequest) -> UserLoop:
    device, rounds, cold = req.device, req.rounds, req.regime is TimingRegime.COLD
    problem = load_problem(read_problem_source(Path(req.op_path)))
    sys.modules["forge_reference"] = problem.module
    init = problem.init_inputs()
    torch.manual_seed(req.seed)
    reference = problem.model_cls(*init).to(device).eval()
    twin = copy.deepcopy(reference)

    flushed = flush_bytes(device)  # here, not in the parent: on CUDA it asks the device (and starts CUDA)

    def draw() -> list[torch.Tensor]:
        return [x.to(device) for x in problem.inputs()]

    def loop(sides: dict[str, plain_loop.Side]) -> dict[str, list[int]]:
        return plain_loop.time_sides(sides, draw, rounds, cold, flushed, device)

    compiled = torch.compile(reference) if req.compile else None
    if compiled is not None:  # built before the snapshot: what compiling loads is not the candidate's doing
        with torch.no_grad():
            compiled(*draw())
    # Eager "before" is timed in the same rotation as "during" (the compiled side included): a
    # compiled neighbour alone slowed eager's calls 1.2-1.3x on a 2-core VM, which read as the
    # candidate's doing when only the second loop had it.
    before_sides: dict[str, plain_loop.Side] = {"eager": lambda x: reference(*x), "twin": lambda x: twin(*x)}
    if compiled is not None:
        before_sides["compile"] = lambda x: compiled(*x)
    null = loop(before_sides)
    watch = ProcessWatch(reference, problem.module)
    module = import_file("forge_candidate", Path(req.candidate_path))
    kernel = module.ModelNew(*init).to(device)
    kernel.load_state_dict(reference.state_dict())
    kernel.eval()
    counted = ForwardTap(problem.model_cls)
    with torch.no_grad():
        for _ in range(_PROBES):
            kernel(*draw())
    counted.restore()
    sides: dict[str, plain_loop.Side] = {"eager": lambda x: reference(*x), "kernel": lambda x: kernel(*x)}
    if compiled is not None:
        sides["compile"] = lambda x: compiled(*x)
    times = loop(sides)
    tampered = watch.changes()
    found = UserLoop(
        regime=req.regime,
        rounds=rounds,
        threads=torch.get_num_threads(),
        eager=paired_ratio(times["eager"], times["kernel"]),
        null=paired_ratio(null["eager"], null["twin"]),
        eager_ms=_median_ms(times["eager"]),
        kernel_ms=_median_ms(times["kernel"]),
        fallbacks=counted.count,
        tampered=tampered,
        slowed=_slowed(null["eager"], times["eager"]),
    )
    if "compile" in times:
        found.compiled = paired_ratio(times["compile"], times["kernel"])
        found.compile_ms = _median_ms(times["compile"])
    return found


def main() -> None:
    request, result = Path(sys.argv[1]), Path(sys.argv[2])
    req = UserLoopRequest.model_validate_json(request.read_text())
    try:
        loop = measure(req)
    except Exception as exc:
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
        loop = UserLoop(regime=req.regime, rounds=req.rounds, threads=torch.get_num_threads())
        loop.failed = "".join(frames[-3:])[-1500:]
    result.write_text(loop.model_dump_json())


if __name__ == "__main__":
    main()
