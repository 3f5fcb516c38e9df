"""docs/tutorial.md is executable: its commands run as written, in a folder laid out as a fresh clone
(the committed example's stored runs, the pins, the asv config), and every output it quotes appears
in the file or the output it names, line for line."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_docs import OLD_NAME
from test_suite_asv import summary_of

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
# <!-- tutorial: run --> before a block of commands; <!-- tutorial: in FILE --> (or "output") before a
# block of what FILE (the commands' output) holds
MARKED = re.compile(r"<!-- tutorial: (run|in [^ ]+|output) -->\n```[a-z]*\n(.*?)```", re.S)

pytestmark = pytest.mark.slow(seconds=60)  # the committed example reported once (about 30 s)


def blocks() -> list[tuple[str, str]]:
    return MARKED.findall(TUTORIAL.read_text())


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    suite = tmp_path_factory.mktemp("tutorial")
    for name in ("asv.conf.json", "pins.toml", "gate-exceptions.toml"):
        shutil.copy(ROOT / name, suite / name)
    commands = "\n".join(text for kind, text in blocks() if kind == "run")
    for machine in set(re.findall(r"--machine (\S+)", commands)):  # the committed example's stored runs
        for folder in ("results", "raw-runs"):
            shutil.copytree(ROOT / folder / machine, suite / folder / machine)
    p = subprocess.run(["bash", "-eu", "-c", commands], cwd=suite, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"})
    # the last command is the report: its exit is its verdict
    summary_of(p, suite / re.findall(r"--out (\S+)", commands)[-1])
    return suite, p.stdout


def test_the_tutorial_runs_commands_and_quotes_outputs():
    kinds = [kind for kind, _ in blocks()]
    assert "run" in kinds and any(k.startswith("in ") for k in kinds) and "output" in kinds, kinds


def test_every_output_the_tutorial_quotes_is_what_its_commands_give(ran):
    suite, output = ran
    for kind, text in blocks():
        if kind == "run":
            continue
        source = output if kind == "output" else (suite / kind.removeprefix("in ")).read_text()
        for line in text.splitlines():
            if line.strip() and line.strip() != "...":
                assert line.strip() in source, (kind, line)


def test_the_report_speaks_the_glossarys_words(ran):
    """Earlier versions' name of the paired designs is gone from every file the report writes (the
    runs' stored keys may keep it; the report never prints them)."""
    suite, output = ran
    old = OLD_NAME
    assert not old.search(output)
    written = [p for p in (suite / "reports").rglob("*") if p.suffix in (".md", ".json", ".csv", ".html")]
    assert len(written) > 10
    for path in written:
        assert not old.search(path.read_text()), path
