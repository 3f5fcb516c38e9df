"""mbaphases find: a bisection over the demo history's first-parent line names the commit
that moved each phase of the story (real asv runs of each commit's own entry, small sizes;
the three searches share what they measured)."""
import json
import os
import subprocess
import sys

import pytest
from test_suite_asv import make_suite, run_mbaphases, with_cases

from mbaphases.demo_repo import IDENTITY, generate

pytestmark = pytest.mark.slow(seconds=330)  # real asv runs, installs or physics over many runs: minutes

CASE = "sac/g1_motion_tracking/mujoco"
# the known-answer sizes (tests/suite/test_demo_history.py): one physics thread, episodes of 5 control
# steps, 120 measured steps (with another process beside it, as the other test stream is, a run's
# physics varies half as much as at 40: docs/log/measurements.md); a search adds batches until decisive
PROFILE = """
[profiles.bisect]
num_envs = 16
warmup_steps = 5
measure_steps = 120
replay_capacity_steps = 4
torch_threads = 1
overrides = ["task.episode_length_s=0.1", "sim.nthread=1"]
"""
# mba-dev -> opt/mujoco-dispatch -> merge/update-state -> mba-next along first parents
MOVED_BY = {"physics": "opt/mujoco-dispatch", "update_state": "merge/update-state", "reset_done": "mba-next"}


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    suite = make_suite(tmp_path_factory.mktemp("find"), "mba-dev")
    pins = suite / "pins.toml"
    pins.write_text(with_cases(pins.read_text(), [CASE]) + PROFILE)
    return suite, generate(suite / "demo-target")


@pytest.fixture(scope="module")
def searches(suite):
    root, _ = suite
    out = {}
    for phase in MOVED_BY:
        out[phase] = run_mbaphases(root, "find", "--phase", phase, "--case", CASE, "mba-dev", "mba-next",
                                   "--profile", "bisect", "--runs", "6", "--python", sys.executable,
                                   "--machine", "findbox", timeout=2400)
    return out


def test_find_names_the_commit_that_moved_each_phase(suite, searches):
    root, shas = suite
    line = [shas[x] for x in ("mba-dev", "opt/mujoco-dispatch", "merge/update-state", "mba-next")]
    records = sorted((root / "raw-runs" / "findbox" / "find").glob("*.json"))
    assert len(records) == len(MOVED_BY)
    for (phase, commit), record in zip(MOVED_BY.items(), records):
        p = searches[phase]
        assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
        assert f"({shas[commit]}) moved {phase}" in p.stdout
        doc = json.loads(record.read_text())
        assert doc["what"] == phase and [x["sha"] for x in doc["line"]] == line
        assert line[doc["found"]] == shas[commit]
        own, total = doc["own"], doc["total"]
        # faster, clear of 0, and most of the total change
        assert own["upper"] < 0 and total["upper"] < 0 and own["estimate"] < total["estimate"] / 2
        for step in doc["steps"]:
            assert step["moved"] == (line.index(shas[commit]) <= step["mid"]), step


def test_every_step_is_printed_with_its_intervals(searches):
    p = searches["update_state"]
    assert "each decision at" in p.stdout and "total: MBA dev -> mba-next" in p.stdout
    steps = [ln for ln in p.stdout.splitlines() if ln.startswith("step ")]
    assert len(steps) == 2
    assert "opt/mujoco-dispatch" in steps[0] and steps[0].endswith("not moved")
    assert "merge/update-state" in steps[1] and steps[1].endswith(": moved")
    assert "ms [" in steps[0]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    root = make_suite(tmp_path_factory.mktemp("findbad"), "mba-dev")
    generate(root / "demo-target")
    return root


@pytest.mark.parametrize("args, message", [
    (["--phase", "physic", "--case", CASE, "mba-dev", "mba-next"], "--phase 'physic' is not one; valid: physics"),
    (["--phase", "physics", "--case", "sac/nope/mujoco", "mba-dev", "mba-next"], "--case 'sac/nope/mujoco' is not"),
    (["--phase", "physics", "--case", CASE, "mba-next", "mba-next"], "are the same commit"),
    (["--phase", "physics", "--case", CASE, "opt/reset", "mba-next"], "is not on the first-parent line"),
    (["--phase", "physics", "--case", CASE, "mba-dev", "no-such-ref"], "unknown revision 'no-such-ref'"),
    (["--phase", "physics", "--case", CASE, "--runs", "1", "mba-dev", "mba-next"], "--runs 1 must be >= 2"),
])
def test_bad_input_is_one_error_line_and_measures_nothing(plain, args, message):
    root = plain
    p = run_mbaphases(root, "find", *args, "--python", sys.executable, "--machine", "badbox")
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], p.stderr
    assert not (root / "raw-runs").exists()


def _commit(repo, message):
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", message], check=True, capture_output=True,
                   env={**os.environ, **IDENTITY})
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_commit_that_cannot_run_the_case_is_skipped_and_said(suite, searches):
    """mba-dev -> broken (the case's config names a task that does not exist) -> a README edit -> update_state optimized: the
    broken middle is skipped as git bisect skip does, the README commit measured instead, and the
    optimization still named."""
    root, shas = suite
    repo = root / "demo-target"
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "skipline", "mba-dev"], check=True)
    owner = repo / "conf" / "sac" / "task" / "g1_motion_tracking" / "mujoco.yaml"
    original = owner.read_text()
    owner.write_text(original.replace("/_shared/task/g1_motion_tracking@task", "/_shared/task/no_such_task@task"))
    broken = _commit(repo, "break the case")
    owner.write_text(original)
    (repo / "README.md").write_text((repo / "README.md").read_text() + "\nA note.\n")
    _commit(repo, "restore the case; a note")
    costs = repo / "src" / "reflab" / "manager" / "dev_costs.py"
    costs.write_text(costs.read_text().replace("PER_TERM_STATE = True", "PER_TERM_STATE = False"))
    optimized = _commit(repo, "shared state cache")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
    p = run_mbaphases(root, "find", "--phase", "update_state", "--case", CASE, "mba-dev", "skipline",
                      "--profile", "bisect", "--runs", "6", "--python", sys.executable, "--machine", "findbox",
                      timeout=2400)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    skip = [ln for ln in p.stdout.splitlines() if ln.startswith("skip ")]
    assert len(skip) == 1 and broken[:10] in skip[0] and "no_such_task" in skip[0], skip
    assert f"({optimized}) moved update_state" in p.stdout
    doc = json.loads(sorted((root / "raw-runs" / "findbox" / "find").glob("*.json"))[-1].read_text())
    assert doc["skipped"] == [1] and doc["found"] == 3
