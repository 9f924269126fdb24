"""What the GPU suite's parts share: the run's context, a part's result, running commands, and a
part's resumable walk through a list of ops or models."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from benchmarks.gpu_suite.archive import pack
from benchmarks.support.paths import BENCHMARKS, ROOT

EXAMPLE_OPS = ROOT / "examples" / "ops"
CATALOG = BENCHMARKS / "op_catalog"
TEST_OPS = ROOT / "tests" / "ops"
TEST_CANDIDATES = ROOT / "tests" / "candidates"


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def markdown(self) -> list[str]:
        return [
            f"**{self.title}**",
            "",
            "| " + " | ".join(self.columns) + " |",
            "|" + "---|" * len(self.columns),
            *("| " + " | ".join(r) + " |" for r in self.rows),
            "",
        ]


@dataclass
class PartResult:
    """What one part found. ``status``: passed, failed (a check did not hold), skipped (not on this
    machine, with why), error (the part itself broke) or partial (its budget ran out: run it again
    to continue). ``state``: what a partial part has done, for the next run to skip."""

    name: str
    status: str
    summary: str
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    state: dict[str, Any] = field(default_factory=dict)
    # the commit and the machine the part ran at: a suite spread over several loans holds parts of
    # several commits, and a loan's calls may land on different GPUs
    commit: str = ""
    machine: str = ""

    def markdown(self) -> list[str]:
        lines = [f"## {self.name}: {self.status}", "", self.summary, ""]
        for table in self.tables:
            lines += table.markdown()
        lines += [f"- {n}" if "\n" not in n else f"```\n{n}\n```" for n in self.notes]
        return [*lines, ""]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PartResult:
        tables = [Table(**t) for t in data.get("tables", [])]
        return cls(**{**data, "tables": tables})


def run_group(cmd: list[str], timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``cmd`` in a process group of its own, the whole group killed when ``timeout`` passes (forge's
    verifier workers too: left behind, they would hold the GPU and skew what is timed next)."""
    with subprocess.Popen(
        cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kwargs
    ) as proc:
        try:
            out, err = proc.communicate(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@dataclass
class Context:
    """One run of the suite: where it writes, whether it is the dry run, each part's budget, the
    running part's end, where it keeps what it has done so far (``save_partial``) and where that
    is packed for a loan to bring back (``copy_to``)."""

    out: Path
    dry: bool
    budget_s: float  # a part's whole time (--part-budget-s)
    device: str = "cuda"
    partial: Path | None = None  # the running part's .partial.json
    copy_to: Path | None = None
    ends_at: float = 0.0  # when the running part must be done (monotonic seconds)
    whole: bool = True  # the running part was given its whole budget (not cut by --total-s)
    machine: str = ""  # the GPU this run's parts run on

    def machine_of(self, part: str) -> str:
        """The machine a part (done, or saved on the way) ran on; empty when it has not run."""
        for path in (self.out / "parts" / f"{part}.json", self.out / "parts" / f"{part}.partial.json"):
            if path.is_file():
                return str(json.loads(path.read_text()).get("machine", ""))
        return ""

    @classmethod
    def make(cls, out: Path, dry: bool, budget_s: float, copy_to: Path | None = None) -> Context:
        (out / "work").mkdir(parents=True, exist_ok=True)
        return cls(out=out, dry=dry, budget_s=budget_s, device="cpu" if dry else "cuda", copy_to=copy_to)

    def start_part(self, partial: Path, seconds: float) -> None:
        """The next part runs for ``seconds`` (its budget, or less where --total-s has less left)."""
        self.partial, self.ends_at = partial, time.monotonic() + seconds
        self.whole = seconds >= self.budget_s * 0.95

    def left(self) -> float:
        """Seconds the running part has left."""
        return self.ends_at - time.monotonic()

    @property
    def work(self) -> Path:
        return self.out / "work"

    def env(self) -> dict[str, str]:
        """The environment forge's commands run in: their own cache, the device, the user loop on
        (the suite checks what a user's session does), and on a dry run Triton's interpreter
        (kernels run on the CPU, their timings mean nothing) and short timing."""
        env = {
            **os.environ,
            "FORGE_CACHE_DIR": str(self.work / "cache"),
            "FORGE_DEVICE": self.device,
            "FORGE_USER_LOOP": "true",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        }
        if self.dry:
            env.update(
                {
                    "TRITON_INTERPRET": "1",
                    "FORGE_TIMING_BUDGET_S": "0.3",
                    # with 10 a side, a clean worker's first slow calls moved a confirmation's median
                    # (a 1.6x RMSNorm read 0.44x, its null 0.83x, in CI); 5 left the null too wide to clear
                    "FORGE_CONFIRM_TRIALS": "30",
                    "FORGE_USER_LOOP_PROCESSES": "1",
                }
            )
        return env

    def forge(self, *args: str, timeout: float, path: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``forge ARGS`` as a user runs it, from the repository root, ``path`` first on its import
        path (TimeoutExpired past ``timeout``, its processes killed)."""
        env = self.env()
        if path is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(path), env["PYTHONPATH"]])
        return run_group([sys.executable, "-m", "forge", *args], timeout, cwd=ROOT, env=env)

    def save_partial(self, result: PartResult) -> None:
        """What the running part has done so far: a command cut off by its loan keeps it, in the
        archive a loan brings back too."""
        if self.partial is not None:
            self.partial.parent.mkdir(parents=True, exist_ok=True)
            self.partial.write_text(json.dumps(result.to_json(), indent=1))
            self.partial.with_name(self.partial.name.replace(".partial", "")).unlink(missing_ok=True)
        if self.copy_to is not None:
            pack(self.out, self.copy_to)

    def previous_state(self) -> dict[str, Any]:
        """The state the running part saved in an earlier run (empty: none)."""
        if self.partial is None or not self.partial.is_file():
            return {}
        return dict(json.loads(self.partial.read_text()).get("state", {}))


def last_json(text: str) -> dict[str, Any] | None:
    """The JSON object a ``--json`` command printed (its stdout), or None."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def times(x: float | None) -> str:
    return f"{x:.2f}x" if x else "-"


def ms(x: float | None) -> str:
    return f"{x:.4f}" if x else "-"


class Row(Protocol):
    """One line of a part that works through a list (an op, a model): its outcome and its cells."""

    status: str

    def cells(self) -> list[str]: ...


R = TypeVar("R", bound=Row)


@dataclass
class Walk:
    """A part's walk through ``items`` (files), resumable: ``one(item, seconds_left, whole)`` gives
    an item's row, or None when the part's time ran out before it could finish (the next run starts
    that item again). ``whole``: the item had all the time a part can give (the first of a run given
    its whole budget), so running out of time is its result, not a reason to try again. An item is
    started only with ``min_left_s`` of the part's time left (a dry run starts each). After every
    item the rows are saved, so a loan cut short keeps them."""

    part: str
    items: list[Path]
    one: Callable[[Path, float, bool], Any]
    table: Callable[[dict[str, Any]], Table]
    min_left_s: float

    def run(self, ctx: Context, rows: dict[str, R]) -> PartResult | None:
        """Fills ``rows`` (those of an earlier run already in it); the partial result when the
        part's time ran out, None when every item is done."""
        first = True
        for item in self.items:
            if item.stem in rows:
                continue
            left = ctx.left()
            if left < self.min_left_s and not ctx.dry:
                return self.partial(rows, "run the part again to continue")
            row = self.one(item, left, first and ctx.whole)
            first = False
            if row is None:
                return self.partial(rows, f"{item.stem} ran out of the part's time; run the part again")
            rows[item.stem] = row
            ctx.save_partial(self.partial(rows, "so far"))
        return None

    def partial(self, rows: dict[str, R], why: str) -> PartResult:
        done = f"{len(rows)} of {len(self.items)} done ({why})"
        return PartResult(self.part, "partial", done, tables=[self.table(rows)], state=rows_state(rows))


def rows_state(rows: dict[str, Any]) -> dict[str, Any]:
    """A walk's rows as a part's saved state (``Walk``'s rows are dataclasses)."""
    return {"rows": {name: asdict(row) for name, row in rows.items()}}


def saved_rows(ctx: Context, row_type: type[R]) -> dict[str, R]:
    """The rows an earlier run of the running part saved."""
    return {name: row_type(**row) for name, row in ctx.previous_state().get("rows", {}).items()}
