"""The presentation layer both front ends share: formats, table rows, the session curve, the
bank screen's filter."""

from __future__ import annotations

from forge.core.statuses import AttemptRole, AttemptStatus, KernelStatus
from forge.core.verdict import Verdict
from forge.harness import KernelSummary, StoredAttempt
from forge.present import KERNEL_COLUMNS, best_so_far, fmt_cost, fmt_times, kernel_cells, source_diff
from forge.tui.screens.bank import matches


def _attempt(i: int, speedup: float | None, role: AttemptRole = AttemptRole.CODER) -> StoredAttempt:
    status = AttemptStatus.PASSED if speedup else AttemptStatus.FAILED_CORRECTNESS
    verdict = Verdict.from_json({"status": str(status), "speedup_vs_eager": speedup})
    return StoredAttempt(i, 1, role, None, status, "src", "cpp", None, None, 0, None, verdict=verdict)


def _kernel(**kw: object) -> KernelSummary:
    base = dict(
        id=1,
        op="residual_rmsnorm",
        op_hash="abc",
        backend="cpp",
        device="cpu",
        capability=None,
        dtype="float32",
        speedup_vs_eager=2.0,
        speedup_vs_compile=None,
        beats_reference=True,
        confirmed=True,
        status=KernelStatus.ACTIVE,
        agent="builtin",
        torch="2.13",
        created_at=None,
    )
    return KernelSummary(**{**base, **kw})  # type: ignore[arg-type]


def test_formats():
    assert fmt_times(2.314) == "2.31x" and fmt_times(None) == "—"
    assert fmt_cost(None, 0) == "—" and fmt_cost(None, 120) == "unknown" and fmt_cost(0.01234, 10) == "$0.0123"


def test_the_curve_is_the_best_so_far_over_coder_attempts():
    attempts = [_attempt(1, None), _attempt(2, 1.5), _attempt(3, 3.0, AttemptRole.CONFIRM), _attempt(4, 1.2)]
    assert best_so_far(attempts) == [0.0, 1.5, 1.5]


def test_kernel_rows_say_what_the_cli_table_says():
    cells = kernel_cells(_kernel(confirmed=False))
    assert len(cells) == len(KERNEL_COLUMNS) and cells[5] == "2.00x unconfirmed" and str(cells[7]) == "active"


def test_kernel_rows_mark_kernels_left_off_under_compile():
    from forge.core.acceptance import CompileStanding

    beats = CompileStanding(beats=True, why="1.40x torch.compile (95% CI 1.20-1.60x), beyond the noise")
    assert kernel_cells(_kernel(speedup_vs_compile=1.4, compile_standing=beats))[6] == "1.40x"
    loses = CompileStanding(beats=False, why="0.80x torch.compile: the interval does not clear 1.0x")
    assert kernel_cells(_kernel(speedup_vs_compile=0.8, compile_standing=loses))[6] == "0.80x eager only"
    assert kernel_cells(_kernel())[6] == "— eager only"  # banked before forge judged it: off under compile


def test_the_bank_filter_matches_words_not_substrings_of_statuses():
    k = _kernel()
    assert matches(k, "rmsnorm") and matches(k, "rmsnorm cpp confirmed") and not matches(k, "unconfirmed")
    assert matches(_kernel(confirmed=False), "unconfirmed") and not matches(k, "triton")


def test_a_diff_against_the_parent():
    assert "first candidate" in str(source_diff(None, "a = 1\n").code)
    assert "-a = 1\n+a = 2" in str(source_diff("a = 1\n", "a = 2\n").code)


def test_a_confirmation_row_says_whether_it_held_not_just_that_it_passed():
    from rich.console import Console

    from forge.present import attempt_cells, verdict_renderable

    why = "1.08x eager (95% CI 1.05-1.14x over 64 pairs, warm): the interval does not clear 1.08x"
    refused = Verdict.from_json({"status": "passed", "speedup_vs_eager": 1.08, "held": False, "why": why})
    row = StoredAttempt(
        21, 4, AttemptRole.CONFIRM, 13, AttemptStatus.PASSED, "src", "cpp", None, None, 0, None, verdict=refused
    )
    assert str(attempt_cells(row)[4]) == "not held"
    held = StoredAttempt(
        22,
        4,
        AttemptRole.CONFIRM,
        13,
        AttemptStatus.PASSED,
        "src",
        "cpp",
        None,
        None,
        0,
        None,
        verdict=refused.model_copy(update={"confirm_held": True}),
    )
    assert str(attempt_cells(held)[4]) == "held" and str(attempt_cells(_attempt(3, 1.5))[4]) == "passed"
    console = Console(width=200, record=True)
    console.print(verdict_renderable(refused))
    assert f"confirmation did not hold: {why}" in console.export_text()
