"""Turning a worker's untrusted observations into named checks (trusted parent, pure logic)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forge.verifier.protocol import TRAIN_KEY, CaseDataReply, CaseDescriptor, CaseFacts, CaseResultReply

if TYPE_CHECKING:
    import torch

    from forge.verifier.parent.compare import Mismatch


def compare(*args: Any, **kwargs: Any) -> Mismatch | None:
    # Imported on first use so that the parent can start its workers before torch is loaded.
    from forge.verifier.parent.compare import compare as _compare

    return _compare(*args, **kwargs)


# Native threads that appear during the very first call (an OpenMP or torch pool starting) are
# legitimate; threads that appear and stay after any later call are not.
_FIRST_CALL = 0
# Median excess of the parent's interval over a reported call time that is still IPC latency.
_WALL_SLACK_NS = 1_500_000


@dataclass
class CaseFindings:
    """Per-check failure text for one case ('' when that check passed)."""

    correctness: Mismatch | None = None
    determinism: Mismatch | None = None
    state: Mismatch | None = None  # the module's buffers after the call (when the reference changes them)
    integrity: dict[str, str] = field(default_factory=dict)


@dataclass
class DrawnCase:
    """A correctness case as the parent checks it: as planned, and its tensors, drawn now."""

    plan: CaseDescriptor
    data: CaseDataReply


def check_case(case: DrawnCase, result: CaseResultReply, device: str, tol: dict[str, float] | None) -> CaseFindings:
    """What ``result`` (the candidate's reply to ``case``) shows, check by check."""
    found = CaseFindings()
    data, stress = case.data, case.plan.kind != "normal"
    reduced = input_elements(data.inputs)
    devices = result.facts.devices
    # the case's slack, for the first call and the second alike
    slack = {"scale_atol": stress, "reduced": reduced, "exact": data.exact, "behind": data.behind}
    found.correctness = compare(data.expected, result.outputs, devices, device, tol, **slack)
    if found.correctness is None and data.layout != result.facts.layout:
        from forge.verifier.parent.compare import Mismatch

        found.correctness = Mismatch(
            -1, "structure", f"returned {result.facts.layout}, the reference returns {data.layout}"
        )
    if found.correctness is None:
        m2 = compare(data.expected, result.outputs2, None, device, tol, **slack)
        if m2 is not None:
            m2.detail = "second call on the same inputs: " + m2.detail
            found.determinism = m2
    if data.expected_state is not None:
        found.state = state_mismatch(data.expected_state, result.state_after, device, tol)
    if found.correctness is None:
        found.correctness = _refill_check(case, result, device, tol, found.integrity)
    _integrity(case, result.facts, found.integrity)
    return found


def _refill_check(
    case: DrawnCase, result: CaseResultReply, device: str, tol: dict[str, float] | None, integ: dict[str, str]
) -> Mismatch | None:
    """The call on the partner's values written into the same buffers: a stale (cached) result is
    an integrity failure, any other miss a correctness one (returned)."""
    partner, refilled = case.data.partner, result.outputs_refill
    if partner is None or refilled is None:
        return None
    reduced = input_elements(case.data.inputs)
    stressed = partner.kind != "normal"
    exact, behind = partner.exact, case.data.behind  # the partner is a case of the same model
    m3 = compare(
        partner.expected, refilled, None, device, tol, scale_atol=stressed, reduced=reduced, exact=exact, behind=behind
    )
    if m3 is None:
        return None
    # Only a result that still matches the *old* values is a cached one; any other miss on the new
    # values is an ordinary correctness failure (e.g. too little precision).
    stress = case.plan.kind != "normal"
    old = compare(
        case.data.expected,
        refilled,
        None,
        device,
        tol,
        scale_atol=stress,
        reduced=reduced,
        exact=case.data.exact,
        behind=behind,
    )
    if old is None:
        integ["no_stale_results"] = (
            "after new values were written into the same input buffers the result stayed that of the "
            f"old values (cached on pointer or shape): {m3.detail}"
        )
        return None
    m3.detail = f"new values in the same input buffers (inputs of case {partner.id}): {m3.detail}"
    return m3


def _integrity(case: DrawnCase, facts: CaseFacts, integ: dict[str, str]) -> None:
    """The integrity checks the worker's facts about one call fail, with what they saw."""
    if not all(facts.plain):
        bad = [t for t, p in zip(facts.types, facts.plain, strict=False) if not p]
        integ["plain_tensor_outputs"] = f"outputs must be exactly torch.Tensor, got {', '.join(bad)}"
    elif not all(facts.storage_ok):
        integ["plain_tensor_outputs"] = "an output has no real (strided, allocated) storage"
    if any(facts.aliases):
        pairs = [f"output {i} shares memory with input {a}" for i, al in enumerate(facts.aliases) for a in al]
        integ["no_aliasing"] = "; ".join(pairs)
    if facts.inputs_modified:
        integ["inputs_unchanged"] = f"the call modified input(s) {facts.inputs_modified}"
    if facts.changed_after_return:
        integ["no_lazy_outputs"] = (
            f"output(s) {facts.changed_after_return} changed after the call returned (work finished in the background)"
        )
    if facts.overwritten_by_later_call:
        integ["fresh_outputs"] = (
            f"output(s) {facts.overwritten_by_later_call} changed when the next call ran on other inputs: every call "
            "returns one buffer of the candidate's, so an output a caller keeps (a residual, a cache) changes under it"
        )
    if facts.busy_python_threads:
        busy = ", ".join(facts.busy_python_threads)
        integ["no_background_threads"] = f"Python thread(s) still running after the call: {busy}"
    elif facts.new_native_threads > 0 and facts.call_index > _FIRST_CALL:
        named = f" ({', '.join(facts.new_thread_names)})" if facts.new_thread_names else ""
        integ["no_background_threads"] = (
            f"{facts.new_native_threads} new native thread(s){named} still alive after a call "
            "(not a pool started on the first call)"
        )
    model = case.plan.model
    if facts.reference_calls and case.plan.kind == "normal" and model.startswith("base"):
        mode = "training" if model == TRAIN_KEY else "eval"
        integ["runs_kernel"] = (
            f"in {mode} mode, on the op's own shapes, ModelNew ran the reference's forward (a fallback): "
            "the bank would hand out the reference, not a kernel"
        )
    if facts.clock_tampering:
        integ["clock_integrity"] = f"timing functions replaced: {', '.join(facts.clock_tampering)}"


def wall_clock_discrepancy(ticks_ns: list[float], reported_ns: list[int]) -> str | None:
    """Compare the worker's per-call times with the parent's clock around the same calls.

    The worker sends a tick just before and just after each timed call; the parent timestamps
    their arrival. An honest interval exceeds the reported time only by IPC wake-up latency
    (tens of microseconds, a few ms when the machine is busy), so the *median* excess is small
    whatever the outliers; a worker whose clock (or timing code) was tampered with shows an excess
    as large as the call itself.
    """
    if len(ticks_ns) != 2 * len(reported_ns) or not reported_ns:
        return f"expected {2 * len(reported_ns)} timing ticks from the worker, got {len(ticks_ns)}"
    parent = [ticks_ns[2 * k + 1] - ticks_ns[2 * k] for k in range(len(reported_ns))]
    excess = sorted(p - r for p, r in zip(parent, reported_ns, strict=True))[len(parent) // 2]
    median_reported = sorted(reported_ns)[len(reported_ns) // 2]
    if excess > max(_WALL_SLACK_NS, median_reported):
        median_parent = sorted(parent)[len(parent) // 2]
        return (
            f"the worker reported a median of {median_reported / 1e6:.3f} ms per call, the parent's clock saw "
            f"{median_parent / 1e6:.3f} ms around the same calls"
        )
    return None


def escaped_events(event_ns: list[int], host_ns: list[int]) -> str | None:
    """CUDA: the host clock around call + device synchronize against the stream's events.

    Launch overhead shows in both (the start event is recorded before the launch); work on
    another stream shows only on the host clock.
    """
    if not event_ns or len(event_ns) != len(host_ns):
        return None
    ev, ho = sorted(event_ns)[len(event_ns) // 2], sorted(host_ns)[len(host_ns) // 2]
    if ho > 2 * ev + 100_000:
        return (
            f"the host clock saw {ho / 1e6:.3f} ms per call, the stream's events {ev / 1e6:.3f} ms: "
            "work ran outside the timed stream (side streams?)"
        )
    return None


def input_elements(inputs: Any) -> int:
    """How many elements a call's inputs hold (the reduction size ``compare`` scales by)."""
    return sum(int(x.numel()) for x in inputs or [] if hasattr(x, "numel"))


def timed_outputs_mismatch(
    expected: list[list[torch.Tensor]],
    got: list[list[Any]],
    tol: dict[str, float] | None,
    sets: list[list[Any]] | None = None,
    behind: list[int] | None = None,
) -> str | None:
    """``sets`` and ``behind`` (``CaseDataReply.behind``): the timed calls' inputs and reduction
    lengths, so that reductions get the tolerance correctness gave them."""
    if len(got) != len(expected):
        return f"returned outputs for {len(got)} timed calls, expected {len(expected)}"
    for k, (e, g) in enumerate(zip(expected, got, strict=True)):
        reduced = input_elements(sets[k]) if sets is not None and k < len(sets) else 1
        m = compare(e, g, None, "", tol, reduced=reduced, behind=behind or ())
        if m is not None:
            return f"timed call {k + 1} (fresh inputs): {m.detail}"
    return None


def detect_backend(source: str) -> str:
    if "triton.jit" in source or ("@jit" in source and "triton" in source):
        return "triton"
    if "load_inline" in source:
        return "cuda" if "cuda_sources" in source else "cpp"
    if "forge.cpp" in source or "from forge import cpp" in source:
        return "cpp"
    if "async_compile.cpp_pybinding(" in source:  # Inductor's C++ kernels (the built-in inductor family)
        return "cpp"
    if "async_compile.triton(" in source:  # Inductor's Triton kernels
        return "triton"
    return "torch"


PASS_TEXT = {
    "correctness": "{n} cases (fresh seeds, 2 weight inits, shapes: {shapes}) within tolerance",
    "stress": "large-magnitude, heavy-tailed and mixed-sign inputs, and inputs holding NaN and inf, match the "
    "reference (NaN and inf positions included)",
    "determinism": "a second call on the same inputs agrees",
    "module_state": "the module's buffers after each call match the reference's, which updates them (state is output)",
    "no_stale_results": "results follow new values written into the same input buffers",
    "inputs_unchanged": "inputs unchanged by every call",
    "no_aliasing": "no output shares memory with an input",
    "plain_tensor_outputs": "every output is a plain torch.Tensor with real storage",
    "no_lazy_outputs": "outputs did not change after the call returned",
    "fresh_outputs": "an output kept alive did not change when the next call ran on other inputs",
    "no_background_threads": "no thread started by a call was left running",
    "clock_integrity": "timing functions untouched",
    "runs_kernel": "the kernel ran (not the reference's forward) on the op's own shapes in the modes verified: {modes}",
}


def state_mismatch(
    expected: dict[str, Any], got: dict[str, Any] | None, device: str, tol: dict[str, float] | None
) -> Mismatch | None:
    """How the candidate's module buffers after a call differ from the reference's, or None."""
    from forge.verifier.parent.compare import Mismatch

    names = list(expected)
    if got is None or sorted(got) != sorted(names):
        return Mismatch(-1, "missing", f"the module's buffers {names} were not reported after the call")
    m = compare([expected[n] for n in names], [got[n] for n in names], None, device, tol)
    if m is None:
        return None
    name = names[m.output] if 0 <= m.output < len(names) else "?"
    m.detail = (
        f"buffer {name!r} after the call differs from the reference's, which updates it when called "
        f"(state is output; e.g. BatchNorm's running statistics in training mode): {m.detail}"
    )
    return m


def refill_partner(cases: list[CaseDescriptor], i: int) -> CaseDescriptor | None:
    """Another ordinary-input case of the same model and input shapes (for the refill check);
    ``cases`` are the reference's case descriptors.

    Only ordinary inputs are refilled: a kernel that fails stress inputs must be reported by the
    stress check, not accused of caching."""
    shapes = [x.shape for x in cases[i].specs]
    for j in list(range(i + 1, len(cases))) + list(range(i)):
        c = cases[j]
        same_inputs = [x.shape for x in c.specs] == shapes
        if c.model == cases[i].model and c.kind == "normal" and same_inputs:
            return c
    return None


def first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return (lines[-1] if lines else "")[:300]


def degenerate_warning(what: str | None) -> str | None:
    """The verdict's warning when a constant output (``what``: "zeros" or "mean") passes every
    correctness case (``compare.ConstantProbe``)."""
    if what:
        return (
            f"degenerate problem: a constant output ({what}) passes every correctness case; the verdict proves little"
        )
    return None
