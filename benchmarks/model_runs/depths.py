"""A model-level run's cost against the model's depth: ``forge optimize MODEL --modules`` on one
model built at two (or more) depths, each in a fresh bank, with the searches it made, its kernels'
checks on the instances each op stands for, its wall time, and the kernelized model's figures.

A model file here has a ``LAYERS`` constant (``benchmarks/models/``: transformers and timm models,
small configs, random weights); each depth runs a copy of the file with ``LAYERS`` set to it.

Usage: python -m benchmarks.model_runs.depths MODEL[:DEPTHS] [...] [--depths 2,8] [--rounds N]
       [--time-limit S] [--python PY] [--page docs/benchmarks/model-run-depths.md]
(``benchmarks/models/timm_vit.py:2,12``: that model at 2 and 12 blocks, the others at --depths)

What a deeper run should show: the same searches as the shallow one (instances that compute alike
are one op), one verification more per extra instance (each takes seconds, not a search's minutes),
a wall time that grows with the checks and the model's own forward (profiled and proven), and a
kernelized model as fast against eager as the shallow one's.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.support.page import add_page_option, run_with_page

_LAYERS = re.compile(r"^LAYERS = \d+", re.MULTILINE)


@dataclass
class DepthRun:
    """One model at one depth: what ``forge optimize --modules --json`` said, and its wall time."""

    depth: int
    seconds: float
    data: dict[str, Any]

    @property
    def ops(self) -> list[dict[str, Any]]:
        return list(self.data["model"]["ops"])

    @property
    def searches(self) -> int:
        return len(self.data["problems"])

    @property
    def verifications(self) -> int:
        return sum(o["verifications"] for o in self.ops)

    @property
    def checks_s(self) -> float:
        return sum(o["instances_s"] or 0.0 for o in self.ops)

    def warm(self, key: str) -> dict[str, Any] | None:
        proof = self.data["model"]["proof"]
        timing = next((t for t in proof["timings"] if t["regime"] == "warm"), None) if proof else None
        return timing.get(key) if timing else None


def _ratio(r: dict[str, Any] | None) -> str:
    return f"{r['median']:.2f}x ({r['low']:.2f}-{r['high']:.2f})" if r else "—"


def _at_depth(model: Path, depth: int, folder: Path) -> Path:
    source = model.read_text()
    if not _LAYERS.search(source):
        raise SystemExit(f"{model}: no LAYERS constant to set the depth with")
    copy = folder / f"{model.stem}_{depth}.py"
    copy.write_text(_LAYERS.sub(f"LAYERS = {depth}", source, count=1))
    return copy


def _run(model: Path, depth: int, a: argparse.Namespace) -> DepthRun | None:
    with tempfile.TemporaryDirectory(prefix="forge-depth-") as tmp:
        copy = _at_depth(model, depth, Path(tmp))
        argv = [a.python, "-m", "forge", "optimize", copy.name, "--modules", "--json", "--rounds", str(a.rounds)]
        argv += ["--bank", "bank.db", *(["--time-limit", str(a.time_limit)] if a.time_limit else [])]
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp)
        seconds = time.perf_counter() - start
    stderr = done.stderr
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        print(
            f"\n{model.name} at {depth} layers: forge exited {done.returncode} without a report:\n{done.stderr[-2000:]}"
        )
        return None
    if "model" not in data:
        print(f"\n{model.name} at {depth} layers: {data.get('error', data)}")
        return None
    if a.keep is not None:  # the run's whole report, whatever the tables below make of it
        a.keep.mkdir(parents=True, exist_ok=True)
        (a.keep / f"{model.stem}_{depth}.json").write_text(json.dumps({"seconds": seconds, **data}))
        (a.keep / f"{model.stem}_{depth}.log").write_text(stderr)
    return DepthRun(depth, seconds, data)


def _ops_table(run: DepthRun) -> None:
    print(f"\n### {run.depth} layers: {run.data['model']['forward_ms']:.2f} ms a forward, run took {run.seconds:.0f} s")
    print(f"{'op':44s} {'runs on':>9s} {'x eager':>8s} {'search s':>9s} {'checks':>12s}  outcome")
    for o in run.ops:
        on = f"{len(o['runs_on'])} of {len(o['instances'])}" if o["instance_checks"] else f"{len(o['instances'])}"
        speed = f"{o['speedup_vs_eager']:.2f}x" if o["speedup_vs_eager"] else "—"
        checks = f"{o['verifications']}: {o['instances_s']:.0f} s" if o["verifications"] else "—"
        failed = [c["path"] for c in o["instance_checks"] if c["outcome"] == "failed"]
        said = (f"kernel {o['kernel_id']}" if o["accepted"] else f"no kernel: {(o['reason'] or '')[:70]}") + (
            f"; failed on {', '.join(failed[:3])}" if failed else ""
        )
        search = f"{o['search_s']:.0f}" if o["search_s"] is not None else "—"
        print(f"{o['op']:44s} {on:>9s} {speed:>8s} {search:>9s} {checks:>12s}  {said}")


def _compare(name: str, runs: list[DepthRun]) -> None:
    print(f"\n### {name}: the depths side by side (warm; speedups over eager)")
    heads = ("layers", "searches", "checks", "run s", "x shallow", "kernelized", "compile", "null eager")
    print(" ".join(f"{h:>18s}" for h in heads))
    first = runs[0]
    for r in runs:
        cells = (
            str(r.depth),
            str(r.searches),
            f"{r.verifications} in {r.checks_s:.0f} s",
            f"{r.seconds:.0f}",
            f"{r.seconds / first.seconds:.2f}x",
            _ratio(r.warm("kernelized_vs_eager")),
            _ratio(r.warm("compiled_vs_eager")),
            _ratio(r.warm("eager_null")),
        )
        print(" ".join(f"{c:>18s}" for c in cells))


def main() -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.model_runs.depths",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("models", nargs="+", help="model files with a LAYERS constant (MODEL:2,12 for its own depths)")
    ap.add_argument("--depths", default="2,8", help="comma-separated depths (default 2,8)")
    ap.add_argument("--rounds", type=int, default=3, help="search rounds per op")
    ap.add_argument("--time-limit", type=float, help="seconds for each run's sessions (forge's --time-limit)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter forge runs with (default: this one)")
    ap.add_argument("--keep", type=Path, help="a folder to keep each run's --json report in (MODEL_DEPTH.json)")
    add_page_option(ap)
    a = ap.parse_args()
    default = [int(d) for d in a.depths.split(",")]
    said = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    print(f"forge ran with {a.python}: torch {said.stdout.strip() or 'not importable: ' + said.stderr[-200:]}")
    print(f"each run: forge optimize MODEL --modules --rounds {a.rounds}, a fresh bank, the built-in agent")
    failed = 0
    for spec in a.models:
        name, _, own = spec.partition(":")
        model, depths = Path(name).resolve(), [int(d) for d in own.split(",")] if own else default
        print(f"\n## {model.name}")
        runs = []
        for depth in depths:
            run = _run(model, depth, a)
            if run is None:
                failed += 1
                continue
            _ops_table(run)
            runs.append(run)
        if len(runs) > 1:
            _compare(model.name, runs)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Model-level runs at two depths: searches, checks, time"))
