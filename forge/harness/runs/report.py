"""``--report DIR``: the run's JSON and a PNG chart of speedups (per op, and per attempt)."""

from __future__ import annotations

import json
from pathlib import Path

from forge.core.errors import UsageError
from forge.harness.runs.run import RunResult
from forge.harness.sessions.session import SessionResult


def write_report(directory: Path, run: RunResult) -> list[Path]:
    """Write results.json (the run's JSON, and each op's attempts) and speedups.png into
    ``directory``; returns the paths written."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--report {str(directory)!r}: cannot create the directory ({exc.strerror})") from exc
    traces = {r.problem: [t.to_json() for t in r.trace] for r in run.results}
    path_json = directory / "results.json"
    path_json.write_text(json.dumps({**run.to_json(), "attempts": traces}, indent=2, default=str))
    path_png = directory / "speedups.png"
    _chart(path_png, run.results)
    return [path_json, path_png]


def _chart(path: Path, results: list[SessionResult]) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = [r.problem for r in results]
    eager = [r.speedup_vs_eager or 0.0 for r in results]
    comp = [r.speedup_vs_compile or 0.0 for r in results]
    xs = range(len(names))
    left.bar([x - 0.2 for x in xs], eager, width=0.4, label="vs eager")
    left.bar([x + 0.2 for x in xs], comp, width=0.4, label="vs torch.compile")
    left.axhline(1.0, color="black", linewidth=0.8)
    left.set_xticks(list(xs), names, rotation=30, ha="right")
    left.set_ylabel("speedup of the accepted kernel (x)")
    left.set_title("accepted kernels (0 = none accepted)")
    left.legend()
    for r in results:
        pts = [(i + 1, t.speedup) for i, t in enumerate(r.trace) if t.speedup]
        if pts:
            right.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=r.problem)
    right.axhline(1.0, color="black", linewidth=0.8)
    right.set_xlabel("attempt")
    right.set_ylabel("speedup vs eager (passing attempts)")
    right.set_title("search progress")
    if results:
        right.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
