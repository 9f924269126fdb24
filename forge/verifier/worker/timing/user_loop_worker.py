"""A user loop's process: ``python -m forge.verifier.worker.timing.user_loop_worker REQUEST RESULT``.

Each of the loop's fresh processes does what a user's script does with a banked kernel: imports the op, builds the
reference in eval mode, imports the candidate as ``forge.kernelbank`` does (``forge_reference``
is the op's module), builds ``ModelNew`` with the reference's weights, and times it beside the
reference and ``torch.compile`` of the reference (``plain_loop``). Before the candidate is
imported, the reference is timed against a second instance of itself (the loop's null) and what a
candidate could change is noted; after the loop, what changed is reported (``tampered``). The
parent trusts none of it beyond a lower claim: the banked figure is never above the isolated
verification's.

A request with ``turns`` runs in a pair (``user_loop_turns``): the loaded process also times eager
beside the kernel in turns with a control process, which builds the reference and its twin alone
and never imports the candidate.
"""

from __future__ import annotations

import copy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from forge.core.forward_tap import ForwardTap
from forge.core.importing import import_file, register_reference
from forge.core.pairing import median_ms, paired_ratio, slowed
from forge.core.problem import Problem, load_problem, read_problem_source
from forge.core.statuses import TimingRegime
from forge.core.timing_records import UserLoop
from forge.verifier.machine.facts import flush_bytes
from forge.verifier.protocol import TurnTimes, UserLoopRequest
from forge.verifier.protocol.turns import OtherProcessEnded, TurnTaker
from forge.verifier.worker.call_form import invoke, use_op
from forge.verifier.worker.timing import plain_loop
from forge.verifier.worker.timing.process_watch import ProcessWatch

_PROBES = 3  # untimed kernel calls watched for the reference's forward


@dataclass
class LoopStage:
    """What a user-loop process builds before its first call: the op's reference in eval mode, a
    copy of it (the twin, the null's other side) and the loop's conditions."""

    req: UserLoopRequest
    problem: Problem
    init: list[Any]
    reference: torch.nn.Module
    twin: torch.nn.Module
    flushed: int

    @classmethod
    def build(cls, req: UserLoopRequest) -> LoopStage:
        problem = load_problem(read_problem_source(Path(req.op_path)))
        register_reference(problem.module)
        use_op(problem.module)
        init = problem.init_inputs()
        torch.manual_seed(req.seed)
        reference = problem.build_model(init).to(req.device).eval()
        # flushed here, not in the parent: on CUDA it asks the device (and starts CUDA)
        return cls(req, problem, init, reference, copy.deepcopy(reference), flush_bytes(req.device))

    def draw(self) -> list[torch.Tensor]:
        return [x.to(self.req.device) for x in self.problem.inputs()]

    def time(self, sides: dict[str, plain_loop.Side], rounds: int) -> dict[str, list[int]]:
        cold = self.req.regime is TimingRegime.COLD
        return plain_loop.time_sides(sides, self.draw, rounds, cold, self.flushed, self.req.device)


def measure(req: UserLoopRequest) -> UserLoop:
    stage = LoopStage.build(req)
    reference, twin, rounds = stage.reference, stage.twin, req.rounds
    taker = TurnTaker(req.turns) if req.turns is not None else None
    compiled = torch.compile(reference) if req.compile else None
    if compiled is not None:  # built before the snapshot: what compiling loads is not the candidate's doing
        with torch.no_grad():
            invoke(compiled, stage.draw())
    if taker is not None:  # the control process is built: its start does not land on these loops
        taker.wait()
    # Eager "before" is timed in the same rotation as "during" (the compiled side included): a
    # compiled neighbour alone slowed eager's calls 1.2-1.3x on a 2-core VM, which read as the
    # candidate's doing when only the second loop had it.
    before_sides: dict[str, plain_loop.Side] = {
        "eager": lambda x: invoke(reference, x),
        "twin": lambda x: invoke(twin, x),
    }
    if compiled is not None:
        before_sides["compile"] = lambda x: invoke(compiled, x)
    null = stage.time(before_sides, rounds)
    watch = ProcessWatch(reference, stage.problem.module)
    kernel, fallbacks = _loaded_kernel(stage)
    sides: dict[str, plain_loop.Side] = {"eager": lambda x: invoke(reference, x), "kernel": lambda x: invoke(kernel, x)}
    times = stage.time(sides | ({"compile": lambda x: invoke(compiled, x)} if compiled is not None else {}), rounds)
    if taker is not None:
        _take_turns(stage, taker, sides)
    found = UserLoop(
        regime=req.regime,
        rounds=rounds,
        threads=torch.get_num_threads(),
        eager=paired_ratio(times["eager"], times["kernel"]),
        null=paired_ratio(null["eager"], null["twin"]),
        eager_ms=median_ms(times["eager"]),
        kernel_ms=median_ms(times["kernel"]),
        fallbacks=fallbacks,
        tampered=watch.changes(),
        slowed=slowed(null["eager"], times["eager"], "once the candidate was loaded"),
    )
    if "compile" in times:
        found.compiled = paired_ratio(times["compile"], times["kernel"])
        found.compile_ms = median_ms(times["compile"])
    return found


def _loaded_kernel(stage: LoopStage) -> tuple[torch.nn.Module, int]:
    """The candidate imported as ``forge.kernelbank`` imports it, built with the reference's
    weights, and how many of its first calls ran the reference's forward (a fallback)."""
    module = import_file("forge_candidate", Path(stage.req.candidate_path))
    kernel = module.ModelNew(*stage.init).to(stage.req.device)
    kernel.load_state_dict(stage.reference.state_dict())
    kernel.eval()
    counted = ForwardTap(stage.problem.model_cls)
    with torch.no_grad():
        for _ in range(_PROBES):
            invoke(kernel, stage.draw())
    counted.restore()
    return kernel, counted.count


def _take_turns(stage: LoopStage, taker: TurnTaker, sides: dict[str, plain_loop.Side]) -> None:
    """Eager beside ``sides``' other side, in turns with the other process; written to the
    turns' file (a failure there is the pair's, not this loop's)."""
    taker.give()
    Path(taker.turns.times_path).write_text(_timed_turns(stage, taker, sides).model_dump_json())


def _timed_turns(stage: LoopStage, taker: TurnTaker, sides: dict[str, plain_loop.Side]) -> TurnTimes:
    """Eager's calls over this process's turns, ``sides`` timed in each."""
    try:
        return TurnTimes(eager_ns=taker.blocks(lambda: stage.time(sides, taker.turns.block_rounds)["eager"]))
    except OtherProcessEnded as exc:
        return TurnTimes(failed=str(exc))


def control(req: UserLoopRequest) -> None:
    """The process without the candidate: eager beside its twin, in turns with the loaded one."""
    turns = req.turns
    assert turns is not None
    try:
        stage = LoopStage.build(req)
        reference, twin = stage.reference, stage.twin
        taker = TurnTaker(turns)
        taker.give()  # built: the loaded process may start its loops
        sides: dict[str, plain_loop.Side] = {"eager": lambda x: invoke(reference, x), "twin": lambda x: invoke(twin, x)}
        found = _timed_turns(stage, taker, sides)
    except Exception as exc:
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
        found = TurnTimes(failed="".join(frames[-3:])[-1500:])
    Path(turns.times_path).write_text(found.model_dump_json())


def main() -> None:
    request, result = Path(sys.argv[1]), Path(sys.argv[2])
    req = UserLoopRequest.model_validate_json(request.read_text())
    if req.turns is not None and req.turns.role == "control":
        control(req)
        return
    try:
        loop = measure(req)
    except Exception as exc:
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
        loop = UserLoop(regime=req.regime, rounds=req.rounds, threads=torch.get_num_threads())
        loop.failed = "".join(frames[-3:])[-1500:]
    result.write_text(loop.model_dump_json())


if __name__ == "__main__":
    main()
