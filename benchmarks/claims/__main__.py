"""Do banked claims hold where a user measures them? Writes one markdown page.

Runs the real ``forge optimize`` (built-in agent, this machine's defaults) on a set of ops into a
fresh bank, then ``benchmarks.claims.reproduce`` on that bank twice, with the heap kept (the regime
forge's claims name: freed memory stays in the process) and returned (glibc's default), and
tabulates per banked kernel: the claim (the lower of the isolated verification and the
confirmation's user loop, with its interval), the two figures it came from, and the reproduction's
median in the judged regime with the strict agreement rule (``reproduce.py``); the same against
torch.compile; then the ops that were not banked and why.

Usage: python -m benchmarks.claims [OPS ...] --out PAGE.md [--bank BANK --skip-optimize]
                                   [--label TEXT] [--rounds N] [--forge CMD]
OPS default to benchmarks/claims_ops/ (ops written for this check, never tuned on) and
examples/ops/. ``--forge`` runs another checkout's CLI for a before/after comparison: install that
checkout in a virtualenv of its own and name its ``forge`` (PYTHONPATH does not do: an editable
install of this checkout is found first). reproduce.py always comes from this checkout.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.support.page import header
from benchmarks.support.paths import BENCHMARKS, ROOT
from forge import harness
from forge.core.paths import BankLocation

DEFAULT_OPS = [BENCHMARKS / "claims_ops", ROOT / "examples" / "ops"]


def _run_optimize(forge: list[str], ops: list[Path], bank: Path) -> dict[str, Any]:
    cmd = [*forge, "optimize", *map(str, ops), "--bank", str(bank), "--json"]
    print("$", shlex.join(cmd), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(done.stderr[-3000:])
    try:
        return dict(json.loads(done.stdout))
    except json.JSONDecodeError:
        return {"error": done.stdout[-2000:]}


def _reproduce(bank: Path, heap: str, rounds: int, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.claims.reproduce", str(bank), "--heap", heap, "--rounds", str(rounds)]
    print("$", shlex.join([*cmd, "--json", str(out)]), flush=True)
    subprocess.run([*cmd, "--json", str(out)], check=True)
    return dict(json.loads(out.read_text()))


def _x(p: list[float] | None) -> str:
    return "-" if not p else f"{p[0]:.2f}x ({p[1]:.2f}-{p[2]:.2f})"


def _mark(held: bool | None) -> str:
    return "-" if held is None else "yes" if held else "**no**"


def _rows(kept: dict[str, Any], returned: dict[str, Any]) -> list[str]:
    back = {k["kernel"]: k for k in returned["kernels"]}
    lines = [
        "| op | judged | claim x eager | isolated | user loop | loop, heap kept | agrees | heap returned | agrees "
        "| claim x compile | loop, heap kept | agrees |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in kept["kernels"]:
        r, judged = back.get(k["kernel"], {}), k["judged"]
        if "not_running" in k:
            gap = f"| {k['op']} | {judged} | {_x(k['claim'])} | | | NOT RUNNING: {k['not_running']} | **no** |"
            lines.append(gap + " | | | | |")
            continue
        lines.append(
            f"| {k['op']} | {judged} | {_x(k['claim'])} | {_x(k['isolated'])} | {_x(k['user_loop'])} "
            f"| {_x(k.get(judged))} | {_mark(k['agrees'])} | {_x(r.get(judged))} | {_mark(r.get('agrees'))} "
            f"| {_x(k['claim_compile'])} | {_x(k.get(judged + '_compile'))} | {_mark(k['agrees_compile'])} |"
        )
    return lines


def _tally(result: dict[str, Any], what: str) -> str:
    held = [k[key] for k in result["kernels"] for key in ("agrees", "agrees_compile") if k.get(key) is not None]
    return f"- {what}: **{sum(held)} of {len(held)}** claims (vs eager and vs torch.compile) agree"


def _family(bank: Path, kernel_id: int) -> str:
    """Where the banked kernel came from: Inductor's code, or one of the built-in coder's own."""
    detail = harness.bank_show(BankLocation(path=bank), kernel_id)
    config = detail.configs[0].config if detail.configs else {}
    if "family" in config:
        return str(config["family"])
    return "inductor" if any(k.startswith("ind_") for k in config) else "built-in"


def _of_bound(bank: Path, kernel_ids: list[int]) -> str:
    """The geomean of the kernels' fractions of their roofline bound, as their verdicts judged them
    (the judged regime's bound), beside eager's and torch.compile's in the same verdicts; kernels
    whose verdict has no fraction (no bound that holds) are left out and counted."""
    found: dict[str, list[float]] = {"kernel": [], "eager": [], "compile": []}
    for kid in kernel_ids:
        roof = harness.bank_show(BankLocation(path=bank), kid).evidence.roofline
        if roof is None or not roof.fraction_candidate or not roof.holds:
            continue
        fractions = {"kernel": roof.fraction_candidate, "eager": roof.fraction_eager, "compile": roof.fraction_compile}
        for who, f in fractions.items():
            if f:
                found[who].append(f)
    if not found["kernel"]:
        return "-"
    others = ", ".join(f"{who} {_geomean(fs):.0%}" for who, fs in found.items() if who != "kernel" and fs)
    missing = len(kernel_ids) - len(found["kernel"])
    return f"{_geomean(found['kernel']):.0%} ({others})" + (f"; {missing} without a bound" if missing else "")


def _against_compile(kept: dict[str, Any], bank: Path, sets: dict[str, str]) -> list[str]:
    """Per set of ops: the geomean of the banked kernels' claims vs torch.compile (and of the
    reproduction in the user's loop), the kernels slower than torch.compile beyond the noise (the
    claim's interval wholly below 1.0x), and the geomean of their fractions of the roofline bound."""
    lines = [
        "| set | banked | geomean claim x compile | geomean loop x compile | slower than compile | sources "
        "| geomean of the bound |"
    ]
    lines.append("|---|---|---|---|---|---|---|")
    for name in sorted(set(sets.values())):
        ks = [k for k in kept["kernels"] if sets.get(k["op"]) == name and k.get("claim_compile")]
        if not ks:
            lines.append(f"| {name} | 0 | - | - | - | - | - |")
            continue
        claims = [k["claim_compile"][0] for k in ks]
        loops = [k[k["judged"] + "_compile"][0] for k in ks if k.get(k["judged"] + "_compile")]
        slower = [f"{k['op']} {k['claim_compile'][0]:.2f}x" for k in ks if k["claim_compile"][2] < 1.0]
        sources: dict[str, int] = {}
        for k in ks:
            family = _family(bank, k["kernel"])
            sources[family] = sources.get(family, 0) + 1
        lines.append(
            f"| {name} | {len(ks)} | {_geomean(claims):.2f}x | {_geomean(loops) if loops else 0:.2f}x "
            f"| {', '.join(slower) or 'none'} | {', '.join(f'{f} {n}' for f, n in sorted(sources.items()))} "
            f"| {_of_bound(bank, [k['kernel'] for k in ks])} |"
        )
    return lines


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _unbanked(optimized: dict[str, Any]) -> list[str]:
    lines = []
    for r in optimized.get("problems", []):
        if not r.get("accepted"):
            lines.append(f"- {r.get('problem')}: {r.get('status')} — {str(r.get('reason') or '')[:400]}")
    return lines or ["- none"]


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.claims")
    ap.add_argument("ops", nargs="*", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--bank", type=Path)
    ap.add_argument("--skip-optimize", action="store_true", help="reproduce an existing --bank only")
    ap.add_argument("--label", default="")
    ap.add_argument("--rounds", type=int, default=31)
    default = f"{sys.executable} -c 'from forge.entry import main; main()'"
    ap.add_argument("--forge", default=default, help="the forge CLI to optimize with")
    a = ap.parse_args()
    ops = [p for o in (a.ops or DEFAULT_OPS) for p in (sorted(o.glob("*.py")) if o.is_dir() else [o])]
    work = Path(tempfile.mkdtemp(prefix="forge-claims-"))
    bank = a.bank or work / "bank.db"
    optimized = {} if a.skip_optimize else _run_optimize(shlex.split(a.forge), ops, bank)
    kept = _reproduce(bank, "kept", a.rounds, work / "kept.json")
    returned = _reproduce(bank, "returned", a.rounds, work / "returned.json")
    sets = {p.stem: p.parent.name for p in ops}
    page = [
        *header(f"Banked claims against a user's loop{': ' + a.label if a.label else ''}"),
        f"{kept['threads']} threads, {a.rounds} rounds a side in each regime.",
        "",
        *_rows(kept, returned),
        "",
        "Agreement (strict): the loop's median inside the claim's interval widened by the claim's null spread.",
        _tally(kept, "heap kept (the regime claims name)"),
        _tally(returned, "heap returned (glibc's default)"),
        "",
        "Against torch.compile, per set of ops (the folder each op file is in):",
        "",
        *_against_compile(kept, bank, sets),
        "",
        "Ops not banked:" if optimized else "",
        *(_unbanked(optimized) if optimized else []),
    ]
    a.out.write_text("\n".join(page) + "\n")
    print(f"wrote {a.out} (work files in {work})")


if __name__ == "__main__":
    main()
