"""The package's layout: its modules import one another without a cycle, so each has one
place in the data flow (every import sits at the top of its file: ruff's PLC0415)."""
import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def import_graph(package: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in the file, deferred ones too)."""
    name = package.name
    modules = {p.stem for p in package.glob("*.py")}
    graph = {}
    for path in sorted(package.glob("*.py")):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == name:
                deps |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(name + "."):
                deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names if a.name.startswith(name + ".")}
        graph[path.stem] = deps - {path.stem}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        return e.args[1]
    return None


def test_the_checker_finds_a_cycle_through_a_deferred_import(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("import os\n\ndef f():\n    from pkg.c import g\n    return g\n")
    (pkg / "c.py").write_text("from pkg import a\n")
    found = cycle(import_graph(pkg))
    assert found is not None and set(found) == {"a", "b", "c"}


@pytest.mark.parametrize("package", ["mbaphases"])
def test_the_package_has_no_import_cycle(package):
    graph = import_graph(ROOT / package)
    assert "side" in graph and graph["side"] == set()  # the shape everything speaks of depends on nothing
    assert cycle(graph) is None, f"import cycle: {' -> '.join(cycle(graph))}"
