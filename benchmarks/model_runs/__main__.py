"""Model-level runs end to end: for each model, ``forge optimize MODEL --modules --json`` in a
fresh bank (profile, choose, carve out, optimize, prove), then the four-way table it measured:
eager, kernelized, torch.compile, kernelized + compiled, per cache regime, with 95% intervals,
and per optimized class its share, its op's speedup and the model gain Amdahl expects from it.

Usage: python -m benchmarks.model_runs [MODEL ...] [--rounds N] [--time-limit S] [--python PY]
       [--page docs/benchmarks/model-runs.md]
(default: the shipped models, examples/models/decoder.py and examples/models/cnn_block.py;
``benchmarks/models/`` holds models from installed packages, transformers and timm, small configs
and random weights). A model whose package is not installed is skipped, and said so; ``--python``
runs forge with another interpreter (timm needs torchvision, whose wheels load with another torch
build). The last table sums the models up: kernelized and compiled against eager, the geomean of each.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT

SHIPPED = [ROOT / "examples" / "models" / "decoder.py", ROOT / "examples" / "models" / "cnn_block.py"]


def _ratio(r: dict[str, Any] | None) -> str:
    return f"{r['median']:.2f}x ({r['low']:.2f}-{r['high']:.2f})" if r else "—"


def _warm(data: dict[str, Any]) -> dict[str, Any] | None:
    proof = data["model"]["proof"]
    return next((t for t in proof["timings"] if t["regime"] == "warm"), None) if proof else None


def _gain_share(warm: dict[str, Any]) -> str:
    """The kernelized model's gain over eager as a share of torch.compile's (1.09x against 1.24x:
    38%); nothing to share where compiling gains nothing."""
    kernelized, compiled = warm.get("kernelized_vs_eager"), warm.get("compiled_vs_eager")
    if not kernelized or not compiled or compiled["median"] <= 1.0:
        return "—"
    return f"{(kernelized['median'] - 1) / (compiled['median'] - 1):.0%}"


def _summary(rows: list[tuple[str, dict[str, Any]]]) -> None:
    """Per model, warm: kernelized and compiled against eager, kernelized+compiled against
    compiled, the eager null; then the geomeans."""
    print("\n## Summary (warm; speedups over eager unless said)")
    heads = ("kernelized", "compile", "k+c vs compile", "null eager", "of compile's gain")
    print(f"{'model':24s} " + " ".join(f"{h:>20s}" for h in heads))
    gains: dict[str, list[float]] = {"kernelized_vs_eager": [], "compiled_vs_eager": []}
    for name, data in rows:
        warm = _warm(data)
        if warm is None:
            print(f"{name:24s} not timed")
            continue
        fields = ("kernelized_vs_eager", "compiled_vs_eager", "kernelized_compiled_vs_compiled", "eager_null")
        print(f"{name:24s} " + " ".join(f"{_ratio(warm.get(f)):>20s}" for f in fields) + f" {_gain_share(warm):>20s}")
        for key, found in gains.items():
            if warm.get(key):
                found.append(warm[key]["median"])
    for key, found in gains.items():
        if found:
            mean = math.exp(sum(math.log(v) for v in found) / len(found))
            print(f"geomean {key.replace('_', ' ')}: {mean:.3f}x over {len(found)} models")


def _missing_package(stderr: str, stdout: str) -> str | None:
    found = re.search(r"No module named '([\w.]+)'", stderr + stdout)
    if found is None or found.group(1).split(".")[0] == "forge":  # forge's own import failing is a failure
        return None
    return found.group(1)


def _report(model: str, data: dict[str, Any], seconds: float) -> None:
    m = data["model"]
    print(f"\n## {Path(model).name}: {m['forward_ms']:.2f} ms a forward on {m['device']} (run took {seconds:.0f} s)")
    print(f"{'class':28s} {'share':>7s}  optimized / why not")
    for c in m["classes"]:
        print(f"{c['class']:28s} {c['share']:7.1%}  {'yes' if c['chosen'] else 'no: ' + c['reason']}")
    print(f"\n{'op':28s} {'share':>7s} {'x eager':>8s} {'x compile':>10s} {'model gain':>11s}")
    for o in m["ops"]:
        e, c, g = o["speedup_vs_eager"], o["speedup_vs_compile"], o["expected_model_gain"]
        only = " (eager only)" if o["accepted"] and o["eager_only"] else ""
        row = f"{o['op']:28s} {o['share']:7.1%} {e or 0:7.2f}x {c or 0:9.2f}x {g or 1:10.3f}x{only}"
        print(row if o["accepted"] else f"{o['op']:28s} {o['share']:7.1%}  no kernel: {o['reason']}")
    proof = m["proof"]
    if proof is None:
        print(f"\nnot proven: {m['proof_error']}")
        return
    verdict = "match" if proof["outputs_match"] else f"DIFFER: {proof['detail']}"
    print(f"\nkernelized instances: {proof['kernelized']}; outputs on fresh inputs: {verdict} ({proof['tolerance']})")
    if proof["compile_error"]:
        print(f"torch.compile: {proof['compile_error']}")
    heads = ("kernelized", "compile", "kernelized+compile", "vs compile", "null eager", "null compile")
    print(f"{'regime':10s} {'eager ms':>9s} " + " ".join(f"{h:>20s}" for h in heads))
    fields = ("kernelized_vs_eager", "compiled_vs_eager", "kernelized_compiled_vs_eager")
    fields += ("kernelized_compiled_vs_compiled", "eager_null", "compiled_null")
    for t in proof["timings"]:
        print(f"{t['regime']:10s} {t['eager_ms']:9.3f} " + " ".join(f"{_ratio(t.get(f)):>20s}" for f in fields))
    for line in m.get("compile_demoted", []):
        print(f"under torch.compile: {line}")
    for line in m.get("training_demoted", []):
        print(f"under autograd: {line}")


def main() -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.model_runs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("models", nargs="*", help="model files or module:factory (default: the shipped models)")
    ap.add_argument("--rounds", type=int, default=4, help="search rounds per op")
    ap.add_argument("--time-limit", type=float, help="seconds for each model's sessions (forge's --time-limit)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter forge runs with (default: this one)")
    add_page_option(ap)
    a = ap.parse_args()
    print("speedups are eager's (or compile's) time over the other's, per round of one call each; 95% CI")
    # the page's header names this interpreter's torch; forge may run under another (--python)
    said = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    print(f"forge ran with {a.python}: torch {said.stdout.strip() or 'not importable: ' + said.stderr[-200:]}")
    failed = 0
    done_rows: list[tuple[str, dict[str, Any]]] = []
    for model in [str(Path(m).resolve()) if Path(m).is_file() else m for m in a.models] or [str(p) for p in SHIPPED]:
        with tempfile.TemporaryDirectory(prefix="forge-model-run-") as tmp:
            argv = [a.python, "-m", "forge", "optimize", model, "--modules", "--json", "--rounds", str(a.rounds)]
            argv += ["--bank", str(Path(tmp) / "bank.db"), "--ops-dir", str(Path(tmp) / "ops")]
            argv += ["--time-limit", str(a.time_limit)] if a.time_limit else []
            start = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp)
            seconds = time.perf_counter() - start
        missing = _missing_package(done.stderr, done.stdout) if done.returncode == 2 else None
        if missing is not None:
            print(f"\n## {Path(model).name}: skipped: it needs {missing}, which {a.python} does not have")
            continue
        try:
            data = json.loads(done.stdout)
        except json.JSONDecodeError:
            print(f"\n## {model}: forge exited {done.returncode} without a report:\n{done.stderr[-2000:]}")
            failed += 1
            continue
        if "model" not in data:
            print(f"\n## {model}: {data.get('error', data)}")
            failed += 1
            continue
        _report(model, data, seconds)
        done_rows.append((Path(model).stem, data))
    _summary(done_rows)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Model-level runs: eager, kernelized, compiled, both"))
