"""Building small banks for runtime tests without running the verifier for each entry.

The verdicts here are synthetic but shaped like real ones; the end-to-end test in
test_end_to_end.py saves a genuinely verified kernel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from forge.core.problem import load_problem, read_problem_source, reference_hash
from forge.core.verdict import Verdict
from forge.db.engine import open_for_writing
from forge.db.kernels import save_kernel

FIXTURES = Path(__file__).resolve().parents[2] / "examples" / "kernelbank"
OP = FIXTURES / "rmsnorm_op.py"
KERNEL = FIXTURES / "rmsnorm_kernel.py"


def passed_verdict(op_path: Path, **over: Any) -> Verdict:
    problem = load_problem(op_path)
    v: dict[str, Any] = {
        "status": "passed",
        "passed": True,
        "problem": problem.name,
        "op_hash": reference_hash(problem),
        "target_class": problem.target_class_path,
        "device": "cpu",
        "capability": None,
        "backend": "cpp",
        "inputs": [{"variant": "as declared", "inputs": [{"shape": [64, 256], "dtype": "float32"}]}],
        "timings_ms": {"candidate": 0.05, "eager": 0.1, "compile": None},
        "speedup_vs_eager": 2.0,
        "speedup_vs_compile": None,
        "timing_meaningful": True,
        "versions": {"torch": torch.__version__, "triton": ""},
        "checks": [{"name": "correctness", "passed": True, "detail": "", "fatal": True}],
    }
    v.update(over)
    return Verdict.from_json(v)


def make_bank(path: Path, kernels: list[tuple[Path, str, dict[str, Any]]]) -> list[int]:
    """kernels: (op file, kernel source, verdict overrides) -> kernel ids."""
    engine = open_for_writing(path)
    ids = [save_kernel(engine, read_problem_source(op), src, passed_verdict(op, **over)) for op, src, over in kernels]
    engine.dispose()
    return ids


def checked_on(path: Path, kernel_id: int, members: list[Any]) -> None:
    """Record, as a model run does after checking them, that the kernel holds on each of a carved
    op's ``members`` (``InstanceUse``s: the first searched, the others verified)."""
    from forge.core.carved_ops import InstanceOutcome
    from forge.core.instance_checks import InstanceCheck
    from forge.db import record_instances

    outcomes = [InstanceOutcome.SEARCHED] + [InstanceOutcome.VERIFIED] * (len(members) - 1)
    checks = [InstanceCheck(path=m.path, config=m.config, outcome=o) for m, o in zip(members, outcomes, strict=True)]
    engine = open_for_writing(path)
    record_instances(engine, kernel_id, checks)
    engine.dispose()
