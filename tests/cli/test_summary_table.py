"""The summary table ``forge optimize`` prints, piped (as into a file or a CI log): every column
whole on one line, the op's name and the kernel's fraction of its bound among them."""

from __future__ import annotations

from forge.cli import optimize_cmd
from forge.core.statuses import SessionStatus
from forge.harness import RunResult, SessionResult


def test_the_piped_summary_keeps_every_column_whole(capsys):
    banked = SessionResult(
        "residual_rmsnorm_long_name",
        1,
        SessionStatus.FINISHED,
        accepted=True,
        kernel_id=3,
        backend="cpp",
        speedup_vs_eager=2.31,
        speedup_vs_compile=0.83,
        regime="warm",
        regimes={"cold": {"eager": 2.99, "compile": 1.21}},
        attempts=8,
        eager_only=True,
        bound_fraction=0.5,
        eager_bound_fraction=0.21,
        compile_bound_fraction=0.4,
    )
    unbounded = SessionResult("softmax", 2, SessionStatus.NO_GAIN, reason="no kernel faster than eager")
    optimize_cmd._summary(RunResult(results=[banked, unbounded]))
    text = capsys.readouterr().out
    assert "│ residual_rmsnorm_long_name │" in text and "│ 50% (eager 21%, compile 40%) │" in text, text
    assert "│ softmax " in text and "softmax: no kernel faster than eager" in text, text
