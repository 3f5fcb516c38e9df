"""mbaphases find: a bisection over the demo history's first-parent line names the commit
that moved each phase of the story (real asv runs of each commit's own entry, small sizes;
the three searches share what they measured)."""
import json
import sys

import pytest
from test_suite_asv import make_suite, run_mbaphases

from mbaphases.demo_repo import generate

CASE = "sac/g1_motion_tracking/mujoco"
# the known-answer sizes (tests/test_demo_history.py): one physics thread, episodes of 5 control steps
PROFILE = """
[profiles.bisect]
num_envs = 16
warmup_steps = 5
measure_steps = 40
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
    text = pins.read_text()
    head, rest = text.split("cases = [", 1)
    pins.write_text(head + f'cases = ["{CASE}"]' + rest[rest.index("]") + 1:] + PROFILE)
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
    assert "opt MuJoCo dispatch" in steps[0] and steps[0].endswith("not moved")
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
