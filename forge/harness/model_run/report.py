"""``--report DIR`` for a model-level run: the ops' report (``write_report``), the model's figures
in results.json under ``model``, and model.png: the model's time four ways, per cache regime,
as speedups over eager with their 95% intervals."""

from __future__ import annotations

import json
from pathlib import Path

from forge.core.model_records import FourWay
from forge.harness.model_run.run import ModelRunResult
from forge.harness.runs.report import write_report

_WAYS = (
    ("kernelized", "kernelized_vs_eager"),
    ("torch.compile", "compiled_vs_eager"),
    ("kernelized + compile", "kernelized_compiled_vs_eager"),
)


def write_model_report(directory: Path, result: ModelRunResult) -> list[Path]:
    """The files written: results.json (with ``model``), speedups.png, model.png."""
    written = write_report(directory, result.run)
    path_json = written[0]
    data = json.loads(path_json.read_text())
    path_json.write_text(json.dumps({**data, "model": result.model_json()}, indent=2, default=str))
    path_png = directory / "model.png"
    _chart(path_png, result.model, result.proof.timings if result.proof is not None else [])
    return [*written, path_png]


def _chart(path: Path, model: str, timings: list[FourWay]) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(1, len(timings))
    for k, t in enumerate(timings):
        xs, medians, below, above = [], [], [], []
        for i, (_, field) in enumerate(_WAYS):
            r = getattr(t, field)
            if r is None:
                continue
            xs.append(i + (k - (len(timings) - 1) / 2) * width)
            medians.append(r.median)
            below.append(r.median - r.low)
            above.append(r.high - r.median)
        ax.bar(xs, medians, width=width, yerr=[below, above], capsize=4, label=f"{t.regime} ({t.rounds} rounds)")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(_WAYS)), [name for name, _ in _WAYS])
    ax.set_ylabel("speedup over eager (95% CI)")
    ax.set_title(f"{Path(model).name}: the model's time, four ways" if timings else f"{model}: not timed")
    if timings:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
