"""The pull-request gate as a CI job runs it (scripts/ci_gate.sh), on one CPU (a one-CPU runner):
pairs in turns there, the deadline, the summary written for the job's page and parsed, and the
demo's known answer: MBA dev FAILs the gate."""
import os
import shutil
import subprocess

import pytest
from test_ci_summary import tables_of
from test_suite_asv import ROOT, make_suite

from mbaphases.demo_repo import generate

pytestmark = pytest.mark.slow(seconds=90)  # real asv runs and physics: minutes

# MBA dev's largest slowdown on one CPU (about 0.67 of main's throughput, docs/log/measurements.md):
# four pairs at the script's default profile (the demo's) decide it: with three, its interval's upper end
# reached 0.656, 0.836 and 0.735 in three runs on this host
CASE = "flashsac/go2_joystick_flat/mujoco"


def test_the_gate_script_decides_on_one_cpu_and_writes_its_summary(tmp_path):
    suite = make_suite(tmp_path, "mba-dev")
    shutil.copy(ROOT / "pins.toml", suite / "pins.toml")  # the demo's pins: its design, pairs in turns
    shutil.copytree(ROOT / "scripts", suite / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", suite / "pyproject.toml")
    # the suite's environment, brought up to date first where it is (a no-op when its stamp matches):
    # a stale one would be reinstalled through the link, from this test's copy of the suite
    subprocess.run(["bash", "-c", "source scripts/bootstrap.sh"], cwd=ROOT, check=True, capture_output=True)
    (suite / ".venv").symlink_to(ROOT / ".venv")
    generate(suite / "demo-target")
    step_summary = tmp_path / "step-summary.md"
    step_summary.write_text("")
    cpu = min(os.sched_getaffinity(0))  # a one-CPU runner: the first CPU this test may use
    p = subprocess.run(["taskset", "-c", str(cpu), "bash", "scripts/ci_gate.sh", "main", "mba-dev", "--repo", "demo-target",
                        "--runs", "4", "--cases", CASE, "--out", "reports/pr"],
                       cwd=suite, capture_output=True, text=True, timeout=1500,
                       env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock"),
                            "GITHUB_STEP_SUMMARY": str(step_summary), "MBAPHASES_CI_DEADLINE_MIN": "10"})
    assert p.returncode == 1 and p.stdout, p.stdout[-3000:] + p.stderr[-3000:]  # the known answer: FAIL
    assert "design: pairs in turns" in p.stdout and f"slots: 1 slot of 1 CPU (CPU {cpu})" in p.stdout
    text = step_summary.read_text()
    assert text == (suite / "reports" / "ci-gate-summary.md").read_text()  # the file a later step posts
    (gate, *_) = tables_of(text)
    assert [row[0] for row in gate[1:]] == [f"`{CASE}`"] and gate[1][1] == "FAIL", text
    assert "reports/pr/page/index.html" in text
    pins = (suite / "reports" / "pr" / "pins.ab-main-vs-mba-dev.toml").read_text()
    assert 'design = "turns"' in pins
