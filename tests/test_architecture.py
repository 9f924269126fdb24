"""Imports point one way: a module imports only from its own component or from a lower layer, the
front ends call only the engine (and the base layer), and no import cycle exists anywhere.

Every import counts: at module level, inside a function, and under ``TYPE_CHECKING``: a cycle
hidden in a function body is still a cycle. The layers are listed here, once; the docs'
architecture page (docs/architecture.md) shows the same list (checked below).

``benchmarks/`` stands above all of forge, beside the tests, under rules of its own (below).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "forge"

# Bottom to top. Components in one layer do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("forge.core",),  # the domain: problem, verdict, statuses, errors, settings
    # the C++ helper candidates build their kernels with: the verifier measures what a call through it costs
    ("forge.cpp",),
    # the bank's schema and the runtime's read-only reader: what forge.db writes, forge.kernelbank reads
    ("forge.bank_schema",),
    # each on the layers below alone
    ("forge.verifier", "forge.db", "forge.agents", "forge.kernelbank"),
    # plans checked for real (applied with the runtime's own code); verifiers on a Ray cluster;
    # the model probe (a model profiled, and kernelized with the runtime's own code, in a process of its own)
    ("forge.parallel", "forge.cluster", "forge.model_probe"),
    ("forge.modelrun",),  # the model probe's old name: op files carved before the rename import it
    ("forge.harness",),  # the engine: orchestration and the operations front ends call
    ("forge.present",),  # how both front ends show things: formats, table rows, a verdict
    ("forge.cli", "forge.tui"),  # front ends: views over the engine
    ("forge.entry",),  # the installed `forge` command: the one place joining both front ends
    ("forge", "forge.__main__"),  # the package's public names, and `python -m forge`
)
FRONT_ENDS = ("forge.cli", "forge.tui")
FRONT_ENDS_SEE = ("forge.harness", "forge.present", "forge.core")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts}


def imported(name: str, path: Path) -> list[tuple[str, str | None]]:
    """Each import in module ``name``'s source (at ``path``), anywhere in it, as (module, name):
    ``import a.b`` is (``a.b``, None), ``from a import b`` is (``a``, ``b``); relative ones resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            found.extend((base, a.name) for a in node.names)
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules among ``known`` that ``name`` imports anywhere in its source (``from pkg import
    mod`` counts as importing ``pkg.mod`` when that is a module)."""
    found = {f"{m}.{a}" if a is not None and f"{m}.{a}" in known else m for m, a in imported(name, path)}
    return {m for m in found if m in known and m != name}


def component(name: str) -> str:
    listed = [c for layer in LAYERS for c in layer]
    matches = [c for c in listed if name == c or (c != "forge" and name.startswith(c + "."))]
    assert matches, f"{name} is in no layer: add its package to LAYERS in {__file__} (and to docs/architecture.md)"
    return max(matches, key=len)


def layer_of(comp: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if comp in layer)


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that does not point down (or, from a front end, not at the engine)."""
    wrong = []
    for name, targets in sorted(graph.items()):
        mine = component(name)
        for target in sorted(targets):
            theirs = component(target)
            if theirs == mine:
                continue
            if layer_of(theirs) >= layer_of(mine):
                wrong.append(f"{name} imports {target}: {theirs} is not below {mine}")
            elif mine in FRONT_ENDS and theirs not in FRONT_ENDS_SEE:
                wrong.append(f"{name} imports {target}: a front end calls only {', '.join(FRONT_ENDS_SEE)}")
    return wrong


def test_every_import_points_down_and_front_ends_see_only_the_engine():
    wrong = violations(import_graph())
    assert not wrong, "\n".join(wrong)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the list of modules around it, or None."""
    state: dict[str, int] = defaultdict(int)  # 0 new, 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state[nxt] == 1:
                return [*path[path.index(nxt) :], nxt]
            if state[nxt] == 0 and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if state[start] == 0 and (found := visit(start)):
            return found
    return None


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checks_themselves_catch_what_they_are_for(tmp_path):
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert component("forge.harness.runs.run") == "forge.harness" and component("forge") == "forge"
    assert violations({"forge.db.kernels": {"forge.core.verdict"}, "forge.cli.app": {"forge.harness"}}) == []
    upward = violations({"forge.db.kernels": {"forge.harness.runs.run"}})
    sideways = violations({"forge.verifier.parent.service": {"forge.agents.roles"}})
    past_the_engine = violations({"forge.cli.bank_cmd": {"forge.db.kernels"}})
    assert [len(upward), len(sideways), len(past_the_engine)] == [1, 1, 1]
    assert "not below" in sideways[0] and "calls only" in past_the_engine[0]
    crossing = {
        "forge.verifier.worker.cases": {"forge.verifier.parent.checks"},
        "forge.verifier.parent.x": {"forge.verifier.protocol"},
    }
    query = tmp_path / "query.py"
    query.write_text('ROWS = "SELECT id FROM kernels WHERE op_name = ?"\n')
    assert sql_holders({"forge.kernelbank.query": query, "forge.db.query": query}) == ["forge.kernelbank.query:1"]
    (crossed,) = side_violations(crossing)
    assert crossed.startswith("forge.verifier.worker.cases imports forge.verifier.parent.checks")


# The verifier by side: what runs in forge's own process (``parent``) and what runs beside the op's
# and the candidate's code (``worker``) import nothing of each other; what both use (``protocol``,
# ``machine``) imports neither side.
PARENT, WORKER = "forge.verifier.parent", "forge.verifier.worker"
SIDES_NEVER = {
    PARENT: (WORKER,),
    WORKER: (PARENT,),
    "forge.verifier.protocol": (PARENT, WORKER),
    "forge.verifier.machine": (PARENT, WORKER),
}


def side_violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for name, targets in sorted(graph.items()):
        for side, never in SIDES_NEVER.items():
            if _within(name, side):
                wrong += [
                    f"{name} imports {t}: {side} never imports {n}"
                    for t in sorted(targets)
                    for n in never
                    if _within(t, n)
                ]
    return wrong


def test_the_verifiers_sides_import_nothing_of_each_other():
    wrong = side_violations(import_graph())
    assert not wrong, "\n".join(wrong)


def sql_holders(modules: dict[str, Path]) -> list[str]:
    """Each string constant holding SQL in ``modules``, outside the bank's schema and forge.db."""
    found = []
    for name, path in sorted(modules.items()):
        if _within(name, "forge.db") or _within(name, "forge.bank_schema"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                found.append(f"{name}:{node.lineno}")
    return found


def test_sql_lives_only_in_the_banks_schema_and_db():
    found = sql_holders(all_modules())
    assert not found, "SQL outside forge.db and forge.bank_schema: " + ", ".join(found)


def test_the_architecture_page_shows_these_layers():
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page[: page.index("## Glossary")]
    for layer in LAYERS:
        for comp in layer:
            if comp not in ("forge", "forge.__main__"):
                assert f"`{comp}`" in section, f"docs/architecture.md does not show {comp}"


# benchmarks/ stands above all of forge, beside the tests: its scripts time each layer's own
# machinery (the verifier's timing loops, the built-in agent's C++ snippets, the plans' cost
# model, the TUI's start), so they may import any forge component, through its public names only
# (no ``_`` module or name). Not the commands (they run ``python -m forge`` as a user does), not the
# bank's schema or SQL (a bank is read and written through forge.db's, forge.kernelbank's and
# forge.harness's functions), never ``tests`` (what both use lives in benchmarks.support), and no
# sys.path edits: the scripts run as modules from the checkout's root.
BENCHMARKS = ROOT / "benchmarks"
BENCHMARKS_NEVER = ("tests", "forge.cli", "forge.entry", "forge.__main__", "forge.db.models", "forge.db.migrations")
# what one script needs past those rules, and why
BENCHMARK_EXCEPTIONS = {
    # the lease's cost per commit is the difference from a commit without the lease check: the same
    # attempt row written through the schema, which no forge function does (forge always checks it)
    ("benchmarks.costs.bank_writes", "forge.db.models"),
}
SQL = re.compile(r"\b(SELECT\b.+\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.DOTALL)


def benchmark_modules() -> dict[str, Path]:
    """Every Python file under benchmarks/: the scripts' packages, and the op and model files they
    ship as data (those import torch and their models' packages only)."""
    return {module_name(p): p for p in BENCHMARKS.rglob("*.py")}


def _within(full: str, prefix: str) -> bool:
    return full == prefix or full.startswith(prefix + ".")


def benchmark_violations(name: str, path: Path) -> list[str]:
    """What module ``name`` (at ``path``) does that benchmarks may not."""
    wrong = []
    for module, attr in imported(name, path):
        full = module if attr is None else f"{module}.{attr}"
        never = next((c for c in BENCHMARKS_NEVER if _within(full, c)), None)
        if never is not None and (name, never) not in BENCHMARK_EXCEPTIONS:
            wrong.append(f"{name} imports {full}: benchmarks never import {never}")
        elif _within(full, "forge") and any(p.startswith("_") and not p.startswith("__") for p in full.split(".")):
            wrong.append(f"{name} imports {full}: not a public name of forge")
        elif full == "sys.path":
            wrong.append(f"{name} imports sys.path: benchmarks run as modules from the checkout's root")
    tree = ast.parse(path.read_text(), filename=str(path))
    sys_names = {
        a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names if a.name == "sys"
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "path" and ast.unparse(node.value) in sys_names:
            wrong.append(f"{name}:{node.lineno} uses sys.path: benchmarks run as modules from the checkout's root")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
            wrong.append(f"{name}:{node.lineno} holds SQL: a bank is read through forge's functions")
    return wrong


def test_benchmarks_import_forge_by_public_names_and_never_the_tests_or_sys_path():
    wrong = [w for name, path in sorted(benchmark_modules().items()) for w in benchmark_violations(name, path)]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles_among_the_benchmarks():
    modules = benchmark_modules()
    graph = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_forge_imports_neither_the_benchmarks_nor_the_tests():
    wrong = [
        f"{name} imports {module}"
        for name, path in sorted(all_modules().items())
        for module, _ in imported(name, path)
        if _within(module, "benchmarks") or _within(module, "tests")
    ]
    assert not wrong, "\n".join(wrong)


def test_the_benchmark_checks_catch_what_they_are_for(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys as system\n"
        "from tests.conftest import OPS\n"
        "from forge.cli import app\n"
        "from forge.db.models import AttemptRow\n"
        "from forge.verifier.machine.facts import _private\n"
        "from forge.db import list_kernels\n"  # allowed
        "system.path.insert(0, '.')\n"
        "ROWS = 'SELECT status FROM attempts'\n"
    )
    wrong = benchmark_violations("benchmarks.costs.probe", script)
    assert len(wrong) == 6, wrong
    said = "\n".join(wrong)
    for words in ("never import tests", "never import forge.cli", "never import forge.db.models"):
        assert words in said
    assert "not a public name" in said and "uses sys.path" in said and "holds SQL" in said
    excepted = benchmark_violations("benchmarks.costs.bank_writes", script)  # the schema alone is let through
    assert len(excepted) == 5 and not any("forge.db.models" in w for w in excepted), excepted
