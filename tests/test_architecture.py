"""Imports point one way: a module imports only from its own component or from a lower layer, the
front ends call only the engine (and the base layer), and no import cycle exists anywhere.

Every import counts: at module level, inside a function, and under ``TYPE_CHECKING``: a cycle
hidden in a function body is still a cycle. The layers are listed here, once; the docs'
architecture page (docs/architecture.md) shows the same list (checked below).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "forge"

# Bottom to top. Components in one layer do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("forge.core",),  # the domain: problem, verdict, statuses, errors, settings
    # each on the base alone
    ("forge.verifier", "forge.db", "forge.agents", "forge.kernelbank", "forge.cpp"),
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


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The forge modules ``name`` imports anywhere in its source (``from pkg import mod`` counts
    as importing ``pkg.mod`` when that is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
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


def test_the_checks_themselves_catch_what_they_are_for():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert component("forge.harness.runs.run") == "forge.harness" and component("forge") == "forge"
    assert violations({"forge.db.kernels": {"forge.core.verdict"}, "forge.cli.app": {"forge.harness"}}) == []
    upward = violations({"forge.db.kernels": {"forge.harness.runs.run"}})
    sideways = violations({"forge.verifier.service": {"forge.agents.roles"}})
    past_the_engine = violations({"forge.cli.bank_cmd": {"forge.db.kernels"}})
    assert [len(upward), len(sideways), len(past_the_engine)] == [1, 1, 1]
    assert "not below" in sideways[0] and "calls only" in past_the_engine[0]


def test_the_architecture_page_shows_these_layers():
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page[: page.index("## Glossary")]
    for layer in LAYERS:
        for comp in layer:
            if comp not in ("forge", "forge.__main__"):
                assert f"`{comp}`" in section, f"docs/architecture.md does not show {comp}"
