"""Inductor's code for an op captured in a process of its own.

A capture compiles the op and runs the code Inductor made for it (to read its output modules, and
to check that they reproduce the op). That sequence can corrupt the heap of the process it runs
in: on a 2-core AMD EPYC (AVX-512), capturing rmsnorm with ``cpp.simdlen=256`` aborted its process
every time ("double free or corruption", "free(): invalid pointer"), while the same kernels run
by torch.compile alone, or by the candidate in its worker, did not. In the coder's process that
was forge's own, and ``forge optimize`` died with it (one run in three or four). So a coder that
knows its op file captures in a child process that loads the op as the coder does: a child that
dies refuses the capture with the reason, and forge goes on.

The child runs ``main``: a ``CaptureJob`` (JSON) on standard input; the ``CaptureResult``'s
fields, pickled, written to the job's ``out`` file.
"""

from __future__ import annotations

import json
import pickle
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from forge.agents.builtin.inductor.capture import Captured, InductorRefused, capture
from forge.core.module_call import CallRefused, recorded_call
from forge.core.problem import load_problem

_TIMEOUT_S = 900.0  # a whole model's capture compiles all of it
# the child imports this module by its name (run with -m, it would be __main__ beside the package's copy)
_CHILD = "from forge.agents.builtin.inductor.capture_apart import main; main()"


@dataclass(frozen=True)
class CaptureJob:
    """One capture: the op file, the device, Inductor's options, the mode, and where the result goes."""

    op_path: str
    device: str
    options: dict[str, Any]
    training: bool
    out: str


@dataclass(frozen=True)
class CaptureResult:
    """The capture, or why there is none."""

    captured: Captured | None
    refused: str | None = None


def capture_apart(op_path: Path, device: str, options: dict[str, Any], training: bool = False) -> Captured:
    """``capture`` of the op at ``op_path`` (its model and inputs built as the coder builds them)
    with Inductor ``options``, in a child process; raises InductorRefused with the reason, a
    child that died or ran past its time included."""
    with tempfile.TemporaryDirectory(prefix="forge-capture-") as tmp:
        out = Path(tmp) / "result.pickle"
        job = CaptureJob(str(op_path), device, options, training, str(out))
        try:
            done = subprocess.run(
                [sys.executable, "-c", _CHILD],
                input=json.dumps(asdict(job)),
                capture_output=True,
                text=True,
                timeout=_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise InductorRefused(f"capturing Inductor's code ran past {_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0 or not out.exists():
            raise InductorRefused(_died(done))
        result = CaptureResult(*pickle.loads(out.read_bytes()))
    if result.captured is None:
        raise InductorRefused(result.refused or "no capture")
    return result.captured


def _died(done: subprocess.CompletedProcess[str]) -> str:
    """Why a capture's process gave no result, in words."""
    code = done.returncode
    how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
    last = [line for line in (done.stderr or "").splitlines() if line.strip()][-3:]
    said = f": {' / '.join(last)[:400]}" if last else ""
    return f"the process that compiled and ran Inductor's code for it {how} (its memory corrupted){said}"


def _run(job: CaptureJob) -> CaptureResult:
    problem = load_problem(Path(job.op_path))
    model, inputs = problem.build_model(), problem.inputs()
    call = getattr(problem.module, "forge_call", None)
    try:
        template = recorded_call(call, model, inputs) if callable(call) else None
    except CallRefused as exc:
        return CaptureResult(None, f"its forge_call cannot be followed: {exc}")
    model = model.to(job.device)
    inputs = [x.to(job.device) for x in inputs]
    try:
        return CaptureResult(capture(model, inputs, template, job.options, training=job.training))
    except InductorRefused as exc:
        return CaptureResult(None, str(exc))


def main() -> None:
    job = CaptureJob(**json.loads(sys.stdin.read()))
    result = _run(job)
    Path(job.out).write_bytes(pickle.dumps((result.captured, result.refused)))
