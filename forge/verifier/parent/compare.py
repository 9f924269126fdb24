"""Comparing a candidate's outputs with the reference's, in the trusted parent (pure logic)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from forge.core.slack_rules import (
    EXACT_MARGIN,
    EXACT_TRUSTED,
    LONGEST_WIDENED,
    TINY_OUTPUT_ATOLS,
    TINY_OUTPUT_REL_ERROR,
)

_DEFAULT_TOL = {torch.float16: 1e-2, torch.bfloat16: 1e-2}
_FP32_TOL = 1e-4


@dataclass
class Mismatch:
    output: int
    kind: str  # count, missing, dtype, shape, device, nan, inf, values
    detail: str
    max_abs: float | None = None
    max_rel: float | None = None
    atol: float | None = None  # the slack applied where values differ (``Slack``)
    rtol: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def tolerance(dtype: torch.dtype, override: dict[str, float] | None) -> tuple[float, float]:
    if override:
        return float(override["atol"]), float(override["rtol"])
    t = _DEFAULT_TOL.get(dtype, _FP32_TOL)
    return t, t


@dataclass(frozen=True)
class Slack:
    """The tolerance one output gets in one case, as ``compare`` applies it: ``atol`` and
    ``rtol`` first (a stress case's atol scaled by the output's magnitude, a scalar sum's rtol
    widened); where that fails, a reduction's output (``per_element`` > 1) is compared again
    with ``reduction_atol``. The op brief states these same figures."""

    atol: float
    rtol: float
    per_element: int  # input elements behind each output element (``reduction_lengths``, or read / written)
    scaled_by: float = 1.0  # the stress case's magnitude factor on atol (1: no scaling)

    def reduction_atol(self, dtype: torch.dtype, expected: torch.Tensor) -> float:
        """The widened atol of a reduction's output (``reduction_atol``); ``atol`` for a scalar
        or an output that reduces nothing."""
        if expected.numel() <= 1:
            return self.atol
        return reduction_atol(dtype, self.atol, self.per_element, expected)


def slack(
    dtype: torch.dtype,
    work: torch.Tensor,
    override: dict[str, float] | None,
    scale_atol: bool,
    reduced: int,
    behind: int = 1,
) -> Slack:
    """The slack for an expected output ``work`` (in its comparison dtype) of ``dtype``, reducing
    ``reduced`` input elements in all, each of its elements depending on up to ``behind`` of them
    (``reduction_lengths``, counted up to ``LONGEST_WIDENED``). A tolerance the op declares is
    taken as it is, scaled on stress cases like any other."""
    atol, rtol = tolerance(dtype, override)
    per_element = max(1, reduced // max(1, work.numel()), min(behind, LONGEST_WIDENED))
    scaled_by = 1.0
    if scale_atol:
        finite = work.abs().nan_to_num(0.0, posinf=0.0, neginf=0.0)
        scaled_by = max(1.0, float(finite.max())) if finite.numel() else 1.0
    if override is None and work.numel() == 1:
        rtol = scalar_rtol(dtype, rtol, per_element)
    return Slack(
        atol=atol * scaled_by, rtol=rtol, per_element=per_element if override is None else 1, scaled_by=scaled_by
    )


def compare(
    expected: list[torch.Tensor],
    got: list[Any],
    devices: list[str | None] | None,
    want_device: str,
    override: dict[str, float] | None = None,
    scale_atol: bool = False,
    reduced: int = 1,
    exact: list[torch.Tensor] | None = None,
    behind: Sequence[int] = (),
) -> Mismatch | None:
    """The first difference between outputs, or None. ``scale_atol`` widens atol by the output's
    magnitude (used for stress inputs, where legitimate reordering errors scale with the values).
    ``reduced``: how many input elements the op reads. An output of n elements is taken as a
    reduction of ``reduced // n`` elements each, and its tolerance grows with that reduction's
    rounding: a scalar's rtol (``scalar_rtol``), a tensor's atol (``reduction_atol``).
    ``behind``: per output, the input elements each of its elements depends on where that is
    more (``reduction_lengths``: a scan, an attention, a square matmul).
    ``exact``: the reference's outputs in float64, for a stress case (see ``beside_exact``)."""
    if len(got) != len(expected):
        return Mismatch(-1, "count", f"returned {len(got)} outputs, the reference returns {len(expected)}")
    for i, (r, c) in enumerate(zip(expected, got, strict=True)):
        if not isinstance(c, torch.Tensor):
            return Mismatch(i, "missing", f"output {i} is not a tensor")
        if c.dtype != r.dtype:
            return Mismatch(i, "dtype", f"output {i} has dtype {c.dtype}, the reference {r.dtype}")
        if tuple(c.shape) != tuple(r.shape):
            return Mismatch(i, "shape", f"output {i} has shape {tuple(c.shape)}, the reference {tuple(r.shape)}")
        if devices is not None and devices[i] != want_device:
            return Mismatch(i, "device", f"output {i} is on {devices[i]}, expected {want_device}")
        if r.is_complex():  # as (real, imaginary) pairs: a cast to a real dtype drops the imaginary part
            r, c = torch.view_as_real(r.resolve_conj()), torch.view_as_real(c.resolve_conj())
        m = _compare_values(i, r, c, override, scale_atol, reduced, behind[i] if i < len(behind) else 1)
        if m and m.kind == "values" and exact is not None and i < len(exact):
            ex = exact[i]
            m = beside_exact(m, r, torch.view_as_real(ex.resolve_conj()) if ex.is_complex() else ex, c, override)
        if m:
            return m
    return None


@dataclass(frozen=True)
class ExactErrors:
    """How far the working-precision reference ``r`` is from its float64 run ``x``, over the
    elements finite in both: the figures ``beside_exact`` holds a candidate to."""

    largest: float
    rms: float
    trusted: bool  # the float64 run stands for the truth (the reference within EXACT_TRUSTED of it)

    def allows(self, off: torch.Tensor, atol: float) -> bool:
        """Whether errors ``off`` (from the float64 run) are within EXACT_MARGIN of the reference's."""
        rms = float(off.square().mean().sqrt()) if off.numel() else 0.0
        largest = float(off.max()) if off.numel() else 0.0
        return largest <= EXACT_MARGIN * self.largest + atol and rms <= EXACT_MARGIN * self.rms + atol


def exact_errors(r: torch.Tensor, x: torch.Tensor) -> ExactErrors | None:
    """The reference's own errors from the float64 run, or None where there is nothing to judge
    against (another shape, not floating, a float64 reference, nothing finite in both)."""
    if x.shape != r.shape or not x.is_floating_point() or r.dtype == torch.float64:
        return None
    xw, rw = x.double(), r.double()
    both = torch.isfinite(xw) & torch.isfinite(rw)
    if not bool(both.any()):
        return None
    own = (rw - xw)[both].abs()
    largest = float(own.max())
    trusted = largest <= EXACT_TRUSTED * max(float(xw[both].abs().max()), 1e-30)
    return ExactErrors(largest, float(own.square().mean().sqrt()), trusted)


def beside_exact(
    m: Mismatch, r: torch.Tensor, x: torch.Tensor, c: torch.Tensor, override: dict[str, float] | None
) -> Mismatch | None:
    """``m`` (a values mismatch of the candidate ``c`` with the reference ``r``) judged against the
    exact outputs ``x``: None when ``c`` is about as close to them as ``r`` is. On large inputs an
    ill-conditioned op is computed far from exact by the reference itself (an attention's softmax
    over nearly tied logits in the thousands: one summation order changes how the weight splits),
    and a candidate summing in another order is as right as the reference and as far from it as
    from exact."""
    own = exact_errors(r, x)
    if own is None:
        return m
    xw, rw, cw = x.double(), r.double(), c.double()
    both = torch.isfinite(xw) & torch.isfinite(rw)
    off = (cw - xw)[both].abs()
    atol = tolerance(r.dtype, override)[0] * max(1.0, float(rw[both].abs().max()))
    if own.trusted and own.allows(off, atol):
        return None
    m.detail += (
        f"; against the float64 reference its largest error is {float(off.max()):.3g} (rms "
        f"{float(off.square().mean().sqrt()):.3g}), the float32 reference's own "
        f"{own.largest:.3g} (rms {own.rms:.3g})"
    )
    return m


def scalar_rtol(dtype: torch.dtype, rtol: float, reduced: int) -> float:
    """The rtol for a scalar that sums ``reduced`` elements: summed in another order (blocked,
    pairwise, in parallel), a float sum's rounding error grows about as eps * sqrt(n), so the
    tolerance is the larger of ``rtol`` and 2 * eps * sqrt(n) (float32, 10^6 elements: 2.4e-4)."""
    if reduced <= 1 or not dtype.is_floating_point:
        return rtol
    return max(rtol, 2.0 * torch.finfo(dtype).eps * math.sqrt(reduced))


def reduction_atol(dtype: torch.dtype, atol: float, per_element: int, expected: torch.Tensor) -> float:
    """The atol for a tensor each of whose elements sums ``per_element`` inputs (a row sum, a
    matmul). Summed in another order, an element's rounding error scales with the magnitude of
    its partial sums, not with its own value: a row sum that cancels to near zero is as far off
    as any other row. The expected output's root mean square stands for that magnitude, so the
    atol is the larger of ``atol`` and 2 * eps * sqrt(n) * rms (float32, 4096 randn per row:
    rms 64, atol 9.8e-4, where two summation orders differ by up to 1.6e-4)."""
    if per_element <= 1 or not dtype.is_floating_point:
        return atol
    work = expected.detach().double()
    finite = work[torch.isfinite(work)]
    if finite.numel() == 0:
        return atol
    rms = float(finite.square().mean().sqrt())
    return max(atol, 2.0 * torch.finfo(dtype).eps * math.sqrt(per_element) * rms)


def _beside_own_scale(i: int, rw: torch.Tensor, cw: torch.Tensor, atol: float) -> Mismatch | None:
    """A tiny output's error at its own scale (KernelBench's tolerance issue: zeros pass an
    atol of 1e-4 when the true outputs are about 1e-5). Called once every element matched (NaN
    met NaN, an inf the same inf), so the candidate is finite wherever the reference is: the
    reference's finite peak decides, in one copy of it and no mask or float64 copies, whether the
    output is tiny at all (every timed call's outputs are checked: most are not)."""
    peak = float(rw.abs().nan_to_num_(0.0, posinf=0.0, neginf=0.0).max()) if rw.numel() else 0.0
    if peak == 0.0 or peak >= TINY_OUTPUT_ATOLS * atol:
        return None
    both = torch.isfinite(rw) & torch.isfinite(cw)
    r, c = rw[both].double(), cw[both].double()
    rel = float((c - r).norm() / r.norm())
    if rel <= TINY_OUTPUT_REL_ERROR:
        return None
    return Mismatch(
        i,
        "values",
        f"output {i}: its values are tiny (largest {peak:.3g}, under {TINY_OUTPUT_ATOLS:g}x atol={atol:.3g}); "
        f"at their own scale the error is {rel:.3g} of their norm (at most {TINY_OUTPUT_REL_ERROR:g})",
        float((c - r).abs().max()),
        rel,
    )


def _all_close_and_finite(c: torch.Tensor, r: torch.Tensor, rtol: float, atol: float) -> bool:
    """Whether every element of ``c`` is within ``isclose``'s tolerance of ``r`` (|c - r| <=
    atol + rtol * |r|, computed as isclose computes it) with both finite, in one reduction and no
    boolean tensor: isclose's passes cost more than the timed call itself on a large output. False
    wherever a NaN or inf is met (the slack is NaN then), and ``isclose`` decides."""
    if c.numel() == 0:
        return True
    slack = (c - r).abs_().sub_(r.abs().mul_(rtol).add_(atol))
    return float(slack.max()) <= 0.0


def _compare_values(
    i: int,
    r: torch.Tensor,
    c: torch.Tensor,
    override: dict[str, float] | None,
    scale_atol: bool,
    reduced: int = 1,
    behind: int = 1,
) -> Mismatch | None:
    if not (r.is_floating_point() or r.is_complex()):
        # integer outputs (argmax indices, counts) are exact: a tie must resolve as the reference's does
        bad = int((r != c).sum())
        return Mismatch(i, "values", f"output {i}: {bad} elements differ (exact match required)") if bad else None
    # fp16/bf16 are compared in fp32 (isclose in half precision would round the tolerance itself).
    work = torch.float64 if r.dtype == torch.float64 else torch.float32
    rw, cw = r.to(work), c.to(work)
    given = slack(r.dtype, rw, override, scale_atol, reduced, behind)
    atol, rtol = given.atol, given.rtol
    if _all_close_and_finite(cw, rw, rtol, atol):  # most outputs, every timed call's among them
        return _beside_own_scale(i, rw, cw, atol) if override is None else None
    # One native pass decides: NaN must meet NaN, inf must meet the same inf, the rest be close.
    ok = torch.isclose(cw, rw, rtol=rtol, atol=atol, equal_nan=True)
    if not bool(ok.all()) and given.per_element > 1:
        # The reduction's widening (a floor beside the stress scaling, not multiplied by it) can
        # only let more through, so its pass over the output is paid only when the first fails.
        wider = given.reduction_atol(r.dtype, rw)
        if wider > atol:
            atol = wider
            ok = torch.isclose(cw, rw, rtol=rtol, atol=atol, equal_nan=True)
    if bool(ok.all()):
        return _beside_own_scale(i, rw, cw, atol) if override is None else None
    nan_r, nan_c = torch.isnan(rw), torch.isnan(cw)
    if not torch.equal(nan_r, nan_c):
        n = int((nan_r != nan_c).sum())
        return Mismatch(i, "nan", f"output {i}: NaN positions differ from the reference at {n} elements")
    inf_r, inf_c = torch.isinf(rw), torch.isinf(cw)
    if not torch.equal(inf_r, inf_c) or not torch.equal(rw[inf_r], cw[inf_r]):
        n = int((inf_r != inf_c).sum())
        return Mismatch(i, "inf", f"output {i}: infinities differ from the reference ({n} positions)")
    fin = torch.isfinite(rw)
    rf, cf = rw[fin].double(), cw[fin].double()
    diff = (cf - rf).abs()
    max_abs = float(diff.max())
    max_rel = float((diff / rf.abs().clamp_min(1e-12)).max())
    n = int((~ok).sum())
    return Mismatch(
        i,
        "values",
        f"output {i}: {n} of {r.numel()} elements outside atol={atol:.3g}, rtol={rtol:.3g} "
        f"(max abs error {max_abs:.3g}, max rel error {max_rel:.3g})",
        max_abs,
        max_rel,
        atol,
        rtol,
    )


class ConstantProbe:
    """Which constant outputs (zeros, or each output's mean) pass every case fed to it so far; fed
    one case's expected outputs at a time, so no case is held after it was checked."""

    NAMES = ("zeros", "mean")

    def __init__(self, override: dict[str, float] | None) -> None:
        self.override = override
        self.passing = set(self.NAMES)
        self.seen = 0

    def add(self, outs: list[torch.Tensor]) -> None:
        self.seen += 1
        for name in [n for n in self.NAMES if n in self.passing]:
            fake = [
                torch.zeros_like(o)
                if name == "zeros" or not o.is_floating_point()
                else torch.full_like(o, float(o[torch.isfinite(o)].mean()) if bool(torch.isfinite(o).any()) else 0.0)
                for o in outs
            ]
            if compare(outs, fake, None, "", self.override) is not None:
                self.passing.discard(name)

    def passes(self) -> str | None:
        """The first constant that passed every case fed, or None (also when none was fed)."""
        return next((n for n in self.NAMES if n in self.passing), None) if self.seen else None


def constant_would_pass(expected: list[list[torch.Tensor]], override: dict[str, float] | None) -> str | None:
    """If zeros, or each output's mean, pass every given case, the problem is degenerate."""
    probe = ConstantProbe(override)
    for outs in expected:
        probe.add(outs)
    return probe.passes()
