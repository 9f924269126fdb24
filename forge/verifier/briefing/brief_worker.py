"""The brief's own process (``python -m forge.verifier.briefing.brief_worker OP.py``, run by
``forge.verifier.briefing.measure``): eager's profile, torch.compile's code and speed, the tolerances and
shape variants the verifier applies, the roofline and the runtime facts, printed as JSON. The
op's own code runs here as it does in the reference worker."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge.core.class_source import imported_source
from forge.core.op_brief import CompiledBaseline, EagerProfile, ImportedClass, OpBrief, OutputTolerance
from forge.core.roofline_record import Roofline
from forge.verifier.briefing.cpp_cost import measure_cpp_cost
from forge.verifier.briefing.inductor_code import trim_output_code
from forge.verifier.briefing.regime_timing import regime_times_ms
from forge.verifier.briefing.slack_brief import output_slacks
from forge.verifier.briefing.transcendental_rates import measure_transcendental_rates
from forge.verifier.machine import facts as machine
from forge.verifier.machine.figures import MachineFigures
from forge.verifier.parent.compare import tolerance
from forge.verifier.parent.timing.statistics import fits_half_cache
from forge.verifier.worker.call_form import invoke, use_op
from forge.verifier.worker.call_profile import profiled, profiled_ops

_PROFILED_CALLS = 5
_TIMED_PAIRS = 21


def eager_profile(
    fn: Callable[[], Any], device: str, timed_ms: float | None, timing: BriefTiming | None = None
) -> EagerProfile:
    """Eager's profile; its time a call is ``timed_ms`` (torch.compile's alternating calls timed
    it already: one eager figure in the brief), else timed here as the verdicts time it."""
    if timed_ms is not None:
        median = timed_ms
    elif timing is not None:
        median = timing.times({"eager": timing.eager})["eager"]
    else:
        raise ValueError("eager_profile needs its time a call or how to take it")
    got = profiled(fn, device, _PROFILED_CALLS)
    # shares of the rows' own time (eager's calls are aten ops through and through), each shown
    # as that share of one unprofiled call: the profiler's own overhead inflates every row
    ops = profiled_ops(got.rows, sum(r[1] for r in got.rows), median, got.launches)
    clock = "cuda" if device == "cuda" else "cpu"
    return EagerProfile(
        median_ms=round(median, 5),
        calls=_TIMED_PAIRS,
        ops=ops,
        clock=clock,
        regime=None if timing is None else "warm" if timing.warm else "cold",
    )


@dataclass
class BriefTiming:
    """How the brief times the op: in the regime its verdicts are judged in, on a few input sets."""

    model: Any
    sets: list[list[Any]]
    warm: bool
    device: str

    def eager(self, inputs: Sequence[Any]) -> Any:
        return invoke(self.model, list(inputs))

    def times(self, sides: dict[str, Callable[[Sequence[Any]], Any]]) -> dict[str, float]:
        return regime_times_ms(sides, self.sets, self.warm, self.device, _TIMED_PAIRS)


def _compiled(timing: BriefTiming) -> CompiledBaseline:
    import torch
    from torch._inductor.utils import run_and_get_code

    compiled = torch.compile(timing.model)
    _, codes = run_and_get_code(lambda: invoke(compiled, timing.sets[0]))
    times = timing.times({"eager": timing.eager, "compiled": lambda inputs: invoke(compiled, list(inputs))})
    eager_ms, compiled_ms = times["eager"], times["compiled"]
    code = "\n\n".join(codes)
    # the ratio of the two medians shown, so the figures agree with each other
    return CompiledBaseline(
        speedup_vs_eager=round(eager_ms / compiled_ms, 3),
        pairs=_TIMED_PAIRS,
        eager_ms=round(eager_ms, 5),
        compiled_ms=round(compiled_ms, 5),
        code=trim_output_code(code),
        code_chars=len(code),
    )


def _judged_warm(inputs: list[Any], outputs: list[Any], device: str) -> bool:
    """The verifier's rule (``timing.statistics.record_regimes``): warm when one call's inputs and
    outputs fit in half the last-level cache."""
    nbytes = sum(t.numel() * t.element_size() for t in [*inputs, *outputs] if hasattr(t, "element_size"))
    return fits_half_cache(nbytes, machine.last_level_cache_bytes(device) or None)


def _runtime(device: str) -> list[str]:
    import torch

    facts = [f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads"]
    maps = Path("/proc/self/maps")
    if maps.exists():
        libs = sorted(
            {Path(ln.split()[-1]).name for ln in maps.read_text().splitlines() if re.search(r"lib(g|i)omp|libomp", ln)}
        )
        if libs:
            facts.append(
                "OpenMP runtime loaded in torch's process: "
                + ", ".join(libs)
                + " (a C++ kernel built with -fopenmp shares it with torch: one thread pool, one OMP_NUM_THREADS)"
            )
    if device == "cpu":
        facts.append(
            "allocator: glibc malloc; forge's workers keep freed memory in the process "
            "(MALLOC_TRIM_THRESHOLD_/MALLOC_MMAP_THRESHOLD_ raised), as a warmed-up program does"
        )
    else:
        p = torch.cuda.get_device_properties(0)
        smem = getattr(p, "shared_memory_per_block_optin", None)
        l2 = getattr(p, "L2_cache_size", None)
        facts.append(
            f"{p.name}: {p.multi_processor_count} SMs, compute capability {p.major}.{p.minor}"
            + (f", L2 {l2 / 2**20:.0f} MiB" if l2 else "")
            + (f", shared memory up to {smem // 1024} KiB a block" if smem else "")
            + "; torch's caching allocator"
        )
    return facts


def _tolerances(
    problem: Any, model: Any, inputs: list[Any], outputs: list[Any], missing: list[str]
) -> list[OutputTolerance]:
    """Each output's tolerance with its slack per kind of case; the bare tolerances where the
    stress draws could not run (said in ``missing``)."""
    override = problem.tolerance.model_dump() if problem.tolerance is not None else None
    try:
        return output_slacks(model, inputs, override, problem.fixed_inputs)
    except Exception as exc:  # the stress cases say it themselves, in every verdict
        missing.append(f"the slack in each kind of case: {_said(exc)}")
    found = []
    for i, out in enumerate(outputs):
        if hasattr(out, "dtype") and out.is_floating_point():
            atol, rtol = tolerance(out.dtype, override)
            found.append(
                OutputTolerance(
                    output=i, dtype=str(out.dtype).removeprefix("torch."), shape=list(out.shape), atol=atol, rtol=rtol
                )
            )
    return found


def _roofline(
    model: Any,
    draws: tuple[list[Any], list[Any]],
    outputs: list[Any],
    device: str,
    eager_ms: float | None,
    figures: MachineFigures | None,
) -> Roofline:
    import torch

    from forge.verifier.worker.op_work import roofline

    inputs = draws[0]
    call = roofline.estimate(model, inputs, outputs, draws[1])
    if figures is None:  # run by hand: the figures of the cache this process writes
        cache = Path(os.environ.get("FORGE_CACHE_DIR") or Path.home() / ".cache" / "forge")
        figures = machine.measured_figures(device, torch.get_num_threads(), cache)
    llc = machine.last_level_cache_bytes(device)
    estimate = roofline.record(call, figures, llc).beside_eager(eager_ms)
    # judged warm by the verifier's rule (inputs and outputs, not the module's state: a rotary
    # op's 128-byte buffer put it 128 bytes over the line, cold in the brief, warm in its verdicts)
    warm = estimate.cache_bound_ms is not None and _judged_warm(inputs, outputs, device)
    bound = estimate.cache_bound_ms if warm and estimate.cache_bound_ms is not None else estimate.bound_ms or 0.0
    return estimate.model_copy(
        update={
            "bound_ms": bound,
            "fraction_eager": round(bound / eager_ms, 4) if eager_ms else None,
            "level": "cache" if warm else None,
        }
    )


def measure(op_path: Path, device: str, compiled: bool = True, figures: MachineFigures | None = None) -> OpBrief:
    """The op's brief; ``figures``: the machine's, as the session checked them (the verdicts'
    rooflines read the same), where the parent passes them."""
    import torch

    from forge.core import shapes
    from forge.core.module_call import output_tensors
    from forge.core.problem import load_problem

    problem = load_problem(op_path)
    use_op(problem.module)
    brief = OpBrief(device=device, tolerance_override=problem.tolerance is not None, runtime=_runtime(device))
    if problem.target_class_path is not None:
        try:
            text, cut = imported_source(problem.model_cls)
        except Exception as exc:  # the class's source is a help to the coder, never a reason to fail
            text, cut = "", False
            brief.missing.append(f"the source of {problem.target_class_path}: {type(exc).__name__}: {exc}")
        if text:
            brief.imported = ImportedClass(name=problem.target_class_path, source=text, cut=cut)
    brief.shape_variants = [shapes.describe(o) for o in shapes.family_overrides(problem.size_constants()).values()]
    torch.manual_seed(0)
    model = problem.build_model().to(device).eval()
    inputs = [t.to(device) if isinstance(t, torch.Tensor) else t for t in problem.inputs()]
    brief.weights = sum(p.numel() for p in model.parameters() if p.is_floating_point())
    state = model.state_dict()
    brief.buffers = [
        f"{name} ({b.numel()} elements)" for name, b in model.named_buffers() if b.is_floating_point() and name in state
    ]
    brief.integer_inputs = [
        i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and not t.is_floating_point()
    ]
    with torch.no_grad():
        out = invoke(model, inputs)
        outputs = output_tensors(out)
        brief.tolerances = _tolerances(problem, model, inputs, outputs, brief.missing)
        if not compiled:
            brief.missing.append("torch.compile: its baseline is off in this run (compile_baseline)")
        timing = BriefTiming(
            model, _timing_sets(problem, inputs, device), _judged_warm(inputs, outputs, device), device
        )
        parts: list[tuple[str, Callable[[], Any]]] = [
            ("compiled", lambda: _compiled(timing) if compiled else None),
            (
                "eager",
                lambda: eager_profile(
                    lambda: invoke(model, inputs), device, brief.compiled.eager_ms if brief.compiled else None, timing
                ),
            ),
        ]
        for part, run in parts:
            try:
                setattr(brief, part, run())
            except Exception as exc:  # a part the agents go without
                brief.missing.append(f"{part}: {_said(exc)}")
        _add_roofline(brief, model, (inputs, timing.sets[1]), outputs, figures)
    if device == "cpu":
        _add_cpp_cost(brief, sum(isinstance(t, torch.Tensor) for t in inputs) + len(outputs))
        if brief.roofline is not None and brief.roofline.transcendentals:
            _add_transcendental_rates(brief, brief.roofline.transcendentals)
    return brief


def _timing_sets(problem: Any, inputs: list[Any], device: str) -> list[list[Any]]:
    """The op's inputs and two more draws: a cold call finds none of them cached, a warm call gets
    new values written into its buffers."""
    import torch

    more = [[t.to(device) if isinstance(t, torch.Tensor) else t for t in problem.inputs()] for _ in range(2)]
    return [inputs, *more]


def _add_roofline(
    brief: OpBrief, model: Any, draws: tuple[list[Any], list[Any]], outputs: list[Any], figures: Any
) -> None:
    """The roofline and the regime the verdicts judge the op in, or what kept them from the brief
    (``draws``: the inputs ``outputs`` came from, and another draw of them)."""
    inputs = draws[0]
    try:
        eager_ms = brief.eager.median_ms if brief.eager else None
        brief.roofline = _roofline(model, draws, outputs, brief.device, eager_ms, figures)
        if machine.last_level_cache_bytes(brief.device):
            brief.regime = "warm" if _judged_warm(inputs, outputs, brief.device) else "cold"
    except Exception as exc:
        brief.missing.append(f"roofline: {_said(exc)}")


def _add_cpp_cost(brief: OpBrief, tensors: int) -> None:
    """What a C++ kernel's call costs here before its own work, passing the op's tensors (a CPU's)."""
    try:
        brief.runtime.append(measure_cpp_cost(tensors).said())
    except Exception as exc:  # no compiler here: a C++ candidate fails with its own error anyway
        brief.missing.append(f"forge.cpp's fixed cost: {_said(exc)}")


def _add_transcendental_rates(brief: OpBrief, evaluations: int) -> None:
    """How fast this CPU evaluates exp, tanh, ... and what the op's own evaluations cost at that."""
    try:
        brief.runtime.append(measure_transcendental_rates(evaluations).said())
    except Exception as exc:  # a fact the agents go without
        brief.missing.append(f"transcendental rates: {_said(exc)}")


def _said(exc: BaseException) -> str:
    first = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"{type(exc).__name__}: {first}"


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m forge.verifier.briefing.brief_worker")
    parser.add_argument("op", type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--figures", help="the machine's figures as JSON (MachineFigures), as the session read them")
    args = parser.parse_args(argv)
    figures = MachineFigures.from_json(json.loads(args.figures)) if args.figures else None
    brief = measure(args.op, args.device, compiled=not args.no_compile, figures=figures)
    sys.stdout.write("\n" + json.dumps(brief.model_dump(mode="json")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
