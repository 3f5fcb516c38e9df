"""The user docs cannot rot: the reference pages are the code's own, every `mbaphases` option and
every `python -c` the docs give exists and runs, every exit status is in the table and ended by a
real command in a test, the figures quoted from stored files match them, each word means one thing,
and nothing committed names the folder of the machine that measured it."""
import argparse
import ast
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mbaphases import exits
from mbaphases.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import example  # noqa: E402

# the measurement log is dated and keeps the words of its day; everything else is the user docs
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "reference").glob("*.md"))]
# earlier versions' name of the paired designs; names in the record (.asv/duet-env, -duet) stay
OLD_NAME = re.compile(r"(?<![-\w])duets?(?![-\w])", re.I)
FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.S)
INLINE = re.compile(r"`([^`\n]+)`")


def commands_of(text: str) -> list[str]:
    """Every shell line of the doc's fenced blocks (continuations joined) and every inline code span."""
    lines = []
    for block in FENCE.findall(text):
        lines += block.replace("\\\n", " ").splitlines()
    return lines + INLINE.findall(FENCE.sub("", text))


def subcommands() -> dict:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: {o for a in p._actions if a.help != argparse.SUPPRESS for o in a.option_strings}
            for name, p in sub.choices.items()}


def test_the_reference_pages_are_the_codes_own():
    p = subprocess.run([sys.executable, "scripts/reference.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_every_option_the_docs_give_a_command_is_one_of_its_own():
    known, wrong, seen = subcommands(), [], 0
    for doc in USER_DOCS:
        for line in commands_of(doc.read_text()):
            for m in re.finditer(r"\bmbaphases ([a-z-]+)((?:\s+[^|;&#]*)?)", line):
                if m.group(1) not in known:
                    continue  # a folder or module name (mbaphases/...), not a command
                for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", m.group(2)):
                    seen += 1
                    if option not in known[m.group(1)]:
                        wrong.append(f"{doc.relative_to(ROOT)}: mbaphases {m.group(1)} {option}")
    assert seen > 50 and not wrong, wrong


def test_every_python_command_the_docs_give_runs():
    snippets = [s for doc in USER_DOCS for line in commands_of(doc.read_text())
                for s in re.findall(r"python -c (\"[^\"]+\"|'[^']+')", line)]
    assert snippets, "the docs give python -c commands (docs/asv.md's first)"
    for snippet in snippets:
        code = shlex.split(snippet)[0]
        p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}:{ROOT / 'tests' / 'suite'}"})
        assert p.returncode == 0, (snippet, p.stderr[-2000:])


def module_and_rest(name: str) -> tuple[Path | None, list[str]]:
    """The longest leading part of a dotted name that is a module of the suite, and the rest."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        path = ROOT.joinpath(*parts[:cut])
        for module in (path.with_suffix(".py"), path / "__init__.py"):
            if module.is_file():
                return module, parts[cut:]
    return None, parts


def top_level_names(module: Path) -> set[str]:
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_every_module_and_name_the_docs_give_exists():
    names = {m for doc in USER_DOCS for m in re.findall(r"`(mbaphases(?:\.[A-Za-z_]+)+)(?=[`(])", doc.read_text())}
    assert len(names) >= 3
    missing = []
    for name in sorted(names):
        module, rest = module_and_rest(name)
        if module is None or (rest and rest[0] not in top_level_names(module)):
            missing.append(name)
    assert not missing, missing


def test_every_file_the_docs_name_exists():
    paths = {m.rstrip(".") for doc in USER_DOCS
             for m in re.findall(r"`((?:mbaphases|scripts|tests|docs|reflab|benchmarks|asv-plugin)/[A-Za-z0-9_/.*-]*)", doc.read_text())}
    # the field's repository keeps its entry under scripts/benchmark/: a path of that repository
    paths = {p for p in paths if not p.startswith("scripts/benchmark/")}
    assert len(paths) > 30
    missing = [p for p in sorted(paths) if not (list(ROOT.glob(p)) if "*" in p else (ROOT / p).exists())]
    assert not missing, missing


def test_every_exit_status_is_in_the_table_and_a_test_ends_a_command_with_it():
    page = (ROOT / "docs" / "reference" / "exit-codes.md").read_text()
    for e in exits.TABLE:
        assert f"| {e.code} |" in page
        path, name = e.tested_by.split("::")
        tree = ast.parse((ROOT / path).read_text())
        (test,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
        assert re.search(rf"== {e.code}\b", ast.get_source_segment((ROOT / path).read_text(), test)), e
    # every status the code returns is one of the table's
    codes = {e.code for e in exits.TABLE}
    for path in (ROOT / "mbaphases").rglob("*.py"):
        for literal in re.findall(r"\b(?:return|sys\.exit\()\s*(\d+)\b", path.read_text()):
            assert int(literal) in codes, (path, literal)


def test_the_turn_bias_table_quotes_the_stored_corrections():
    text = (ROOT / "docs" / "statistics.md").read_text()
    rows = [r for r in text.splitlines() if r.startswith("| demo profile")]
    stored = tomllib.loads((ROOT / "mbaphases" / "turn_bias.toml").read_text())["correction"]
    assert len(rows) == len(stored)
    for c in stored:
        cpus = f"{c['cpus']} CPU{'s' if c['cpus'] != 1 else ''} a run"
        want = f"| {c['label']} | {c['bias']:+.4f} | {c['se']:.4f} | {c['df']} |"
        assert any(cpus in r and want in r for r in rows), (c["label"], cpus, want)


def test_a_word_from_earlier_versions_is_gone_from_docs_help_and_reports():
    old = OLD_NAME
    for doc in USER_DOCS:
        assert not old.search(doc.read_text()), doc
    for command in subcommands():
        p = subprocess.run([sys.executable, "-m", "mbaphases.cli", command, "--help"], cwd=ROOT, capture_output=True,
                           text=True)
        assert p.returncode == 0 and not old.search(p.stdout), (command, p.stdout)
    for template in (ROOT / "mbaphases" / "templates").iterdir():
        assert not old.search(template.read_text()), template


def test_the_readme_is_short_and_the_glossary_and_the_map_are_one_click_away():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "docs/glossary.md" in readme and "docs/index.md" in readme
    index = (ROOT / "docs" / "index.md").read_text()
    linked = set(re.findall(r"\]\(([^)#]+)", index))
    for page in [*(ROOT / "docs").glob("*.md"), *(ROOT / "docs" / "reference").glob("*.md")]:
        if page.name != "index.md":
            assert str(page.relative_to(ROOT / "docs")) in linked, page
    for target in linked:
        assert (ROOT / "docs" / target).exists(), target


@pytest.mark.parametrize("folder", ["results", "raw-runs"])
def test_nothing_committed_names_the_folder_of_the_suite_that_measured_it(folder):
    files = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    assert files
    named = [f for f in files if example.normalised(f) != f
             or (Path(f).suffix in (".json", ".csv", ".toml") and example.normalised((ROOT / f).read_text()) != (ROOT / f).read_text())]
    assert not named, named[:5]
    tracked = subprocess.run(["git", "grep", "-lE", "/t[m]p/", "--", "results", "raw-runs", "scripts", "docs",
                              ":!docs/log"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert not tracked, tracked[:5]
