"""The package's layout: its modules import one another without a cycle, so each has one
place in the data flow (every import sits at the top of its file: ruff's PLC0415), and no function
of the suite is beyond what one reader can hold (cyclomatic complexity, radon)."""
import ast
import graphlib
from pathlib import Path

import pytest
from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[2]


def import_graph(package: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in the file, deferred ones too), by
    dotted name under the package ("stats.rules"); a subpackage counts as its __init__."""
    name = package.name

    def dotted(path: Path) -> str:
        parts = path.relative_to(package).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {dotted(p) for p in package.rglob("*.py")}

    def known(mod: str) -> str | None:
        mod = mod.removeprefix(name + ".")
        return mod if mod in modules else None

    graph = {}
    for path in sorted(package.rglob("*.py")):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and (node.module == name or node.module.startswith(name + ".")):
                base = node.module.removeprefix(name).lstrip(".")
                for a in node.names:
                    sub = known(f"{base}.{a.name}" if base else a.name)
                    deps.add(sub or known(base) or base)
            elif isinstance(node, ast.Import):
                deps |= {known(a.name) or a.name for a in node.names if a.name.startswith(name + ".")}
        graph[dotted(path)] = deps - {dotted(path), ""}
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
    # the statistics depend on nothing of the suite but themselves
    assert all(dep.startswith("stats") for mod, deps in graph.items() if mod.startswith("stats") for dep in deps)
    assert cycle(graph) is None, f"import cycle: {' -> '.join(cycle(graph))}"


MOST_COMPLEX = 30  # radon's cyclomatic complexity: a function above it is split (docs/layout.md)


def complexities(paths: list[Path]) -> dict[str, int]:
    """'path:function' -> its cyclomatic complexity (methods and closures counted apart)."""
    out = {}
    for path in paths:
        for block in cc_visit(path.read_text()):
            for item in [block, *getattr(block, "methods", []), *getattr(block, "closures", [])]:
                out[f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{item.name}"] = item.complexity
    return out


def test_the_complexity_checker_sees_a_branchy_function(tmp_path):
    branchy = tmp_path / "branchy.py"
    branchy.write_text("def f(x):\n" + "".join(f"    if x == {k}:\n        return {k}\n" for k in range(40)))
    assert complexities([branchy])[f"{branchy}:f"] == 41


def test_no_function_of_the_suite_is_above_the_complexity_bound():
    files = [p for folder in ("mbaphases", "benchmarks", "scripts", "asv-plugin") for p in (ROOT / folder).rglob("*.py")
             if "build" not in p.parts]
    found = complexities(files)
    assert len(found) > 300
    above = {name: c for name, c in found.items() if c > MOST_COMPLEX}
    assert not above, f"above complexity {MOST_COMPLEX}: {above}"
