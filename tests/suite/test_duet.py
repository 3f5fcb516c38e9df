"""Pairs across two CPUs (mbaphases run --duet): the two sides of a pair at the same time, one CPU each,
every pool at one thread, each case started together; the gate decides on the paired ratios. Real asv,
real physics, the demo target; an A/A (the same code under two commits) must not FAIL. Pairs in turns
on one CPU: tests/suite/test_turns_one_cpu.py."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from test_suite_asv import make_suite, run_mbaphases, summary_of, with_cases

from mbaphases.demo_repo import generate

pytestmark = [pytest.mark.slow(seconds=120), pytest.mark.two_cpus]  # real asv runs: minutes; pairs across two CPUs

CASES = ["sac/g1_walk_flat/mujoco", "flashsac/g1_walk_flat/motrix"]
ROUNDS = 6


def aa_pins(suite) -> None:
    """main against a commit of the same tree (an empty commit on top), two cases, a profile long
    enough that a run's figure is not one scheduler tick."""
    text = (suite / "pins.toml").read_text()
    text = text.replace('ref = "mba-dev"', 'ref = "aa"').replace('label = "MBA dev"', 'label = "main again"')
    text = with_cases(text, CASES)
    text += ('\n[profiles.aa]\nnum_envs = 8\nwarmup_steps = 3\nmeasure_steps = 40\nreplay_capacity_steps = 4\n'
             'torch_threads = 1\noverrides = ["sim.nthread=1"]\n')
    (suite / "pins.toml").write_text(text)


def aa_suite(tmp):
    """The demo target with main and a commit of the same tree on top (``aa``), and their pins."""
    suite = make_suite(tmp, "aa")
    generate(suite / "demo-target")
    repo = suite / "demo-target"
    for args in (["checkout", "-q", "-b", "aa", "main"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "the same tree"],
                 ["checkout", "-q", "main"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    aa_pins(suite)
    return suite


@pytest.fixture(scope="module")
def aa(tmp_path_factory):
    suite = aa_suite(tmp_path_factory.mktemp("duet"))
    p = run_mbaphases(suite, "run", "--duet", "--profile", "aa", "--runs", str(ROUNDS), "--machine", "duetbox")
    return suite, p


def test_an_aa_duet_runs_in_pairs_on_two_cpus_and_never_fails(aa, tmp_path):
    suite, p = aa
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "allocation: no earlier runs of this set-up and design on this machine" in p.stdout
    metas = [json.loads(m.read_text()) for m in (suite / "raw-runs" / "duetbox").glob("*/run*.meta.json")]
    assert len(metas) == 2 * ROUNDS
    by_pair = {}
    for m in metas:
        by_pair.setdefault(m["duet"]["pair"], []).append(m)
    assert len(by_pair) == ROUNDS
    for pair in by_pair.values():
        a, b = sorted(pair, key=lambda m: m["duet"]["role"])
        # one CPU each, the partner named, every case started together (both reached its barrier)
        assert {a["duet"]["cpu"], b["duet"]["cpu"]} == {0, 1} and a["duet"]["partner"] == b["commit"]
        for m in (a, b):
            assert m["duet"]["threads"]["OMP_NUM_THREADS"] == "1" and m["duet"]["affinity"] == [m["duet"]["cpu"]]
            assert m["duet"]["threads"]["UNILAB_COLLECTOR_TORCH_THREADS"] == "1"
            assert all(c["partner_arrived"] for c in m["duet"]["cases"].values())
            assert json.loads((suite / "raw-runs" / "duetbox" / m["commit"] / f"run{m['run']}.json").read_text())[
                "results"], "the joined JSON holds the cases"
        starts = [abs(a["duet"]["cases"][c]["started"] - b["duet"]["cases"][c]["started"]) for c in CASES]
        assert max(starts) < 2.0, starts
    # the CPUs' roles swap every round
    role0 = [next(m for m in by_pair[k] if m["duet"]["role"] == 0)["commit"] for k in sorted(by_pair)]
    assert len(set(role0)) == 2
    r = run_mbaphases(suite, "report", "--machine", "duetbox", "--out", str(tmp_path / "rep"))
    summary = summary_of(r, tmp_path / "rep")
    for case in summary["cases"]:
        assert case["gate"] != "FAIL", case  # the same code cannot be 10% slower than itself
        assert f"paired over {ROUNDS} pairs" in case["gate_detail"]["note"], case["gate_detail"]
    batch = json.loads(next((suite / "raw-runs" / "duetbox" / "batches").glob("*.json")).read_text())
    assert batch["duet"]["pairs"] == [["main direct", "main again"]]


def test_a_batch_plans_its_steps_and_rounds_from_the_machines_earlier_pairs(aa):
    """A second duet batch on a machine that holds the A/A's six pairs: before its runs it says
    where their variance sat and which steps and rounds reach the target at the least time, and
    its batch record keeps that plan."""
    suite, first = aa
    assert first.returncode == 0
    shutil.copytree(suite / "raw-runs" / "duetbox", suite / "raw-runs" / "planbox",
                    ignore=shutil.ignore_patterns("batches"))
    p = run_mbaphases(suite, "run", "--duet", "--profile", "aa", "--runs", "2", "--machine", "planbox")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    said = [line for line in p.stdout.splitlines() if line.startswith("allocation")]
    assert said[0].startswith(f"allocation (pairs (star), from {ROUNDS} earlier pairs a case on this machine)"), said
    (record,) = [json.loads(r.read_text()) for r in (suite / "raw-runs" / "planbox" / "batches").glob("*.json")]
    plan = record["allocation"]
    assert sorted(x["case"] for x in plan["cases"]) == sorted(CASES)
    assert all(x["runs"] == ROUNDS and x["window_sd"] > 0 for x in plan["cases"])  # the A/A's pairs, not its own
    assert plan["now"] == {**plan["now"], "measure_steps": 40, "runs": 2}
    assert plan["least_time"] is None or plan["least_time"]["median_half_width"] <= plan["target_half_width"]


def pairs_in_turns_on(suite, report_dir, cpu: int | None) -> None:
    """A profile of two threads: a pair in turns takes the profile's CPUs (one slot of two), each side the
    pinned program (two torch threads); under a one-CPU affinity (``cpu``: a one-CPU CI runner) the same
    command takes turns on that CPU, every pool at one thread, the plan saying the profile asked for two
    and the report saying it on every verdict. Each run records the CPUs it had and its pools."""
    pins = suite / "pins.toml"
    if "[profiles.aa2]" not in pins.read_text():
        pins.write_text(pins.read_text() + '\n[profiles.aa2]\nnum_envs = 8\nwarmup_steps = 1\nmeasure_steps = 10\n'
                        'replay_capacity_steps = 4\ntorch_threads = 2\noverrides = ["sim.nthread=1"]\n')
    machine = f"two-thread-{'all' if cpu is None else cpu}"
    args = ["run", "--design", "turns", "--profile", "aa2", "--runs", "2", "--machine", machine]
    prefix = [] if cpu is None else ["taskset", "-c", str(cpu)]
    p = subprocess.run([*prefix, sys.executable, "-m", "mbaphases.cli", *args], cwd=suite, capture_output=True,
                       text=True, timeout=1200, env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock")})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    have = sorted(os.sched_getaffinity(0))[:2] if cpu is None else [cpu]
    short = len(have) < 2
    assert ("the profile asks for 2 CPUs a side and this host gives 1" in p.stdout) == short, p.stdout[:3000]
    metas = [json.loads(m.read_text()) for m in (suite / "raw-runs" / machine).glob("*/run*.meta.json")]
    assert len(metas) == 4 and all(not m["failed_cases"] for m in metas)
    for m in metas:
        ran = m["environment"]["cpus"]
        assert ran["affinity"] == have and ran["count"] == len(have) and ran["profile_asks"] == 2
        assert ran["pools"]["UNILAB_COLLECTOR_TORCH_THREADS"] == str(len(have)) == ran["pools"]["OMP_NUM_THREADS"]
        assert m["duet"]["share_cpu"] and m["duet"]["cpus"] == have
    record = json.loads(next((suite / "raw-runs" / machine / "batches").glob("*.json")).read_text())
    assert record["design"]["kind"] == "turns" and record["slots"]["slots"] == [have]
    r = run_mbaphases(suite, "report", "--machine", machine, "--min-runs", "2", "--out", str(report_dir),
                      env={"MBAPHASES_PROFILE": "aa2"})
    summary = summary_of(r, report_dir)
    notes = [c["gate_detail"]["note"] for c in summary["cases"]]
    assert notes and all(("the profile asks for 2" in n) == short for n in notes), notes
    assert all(c["gate"] in ("PASS", "INCONCLUSIVE") for c in summary["cases"]), summary["cases"]  # an A/A
    table = (report_dir / "report.md").read_text()
    assert "cpus.affinity" in table and "cpus.pools.UNILAB_COLLECTOR_TORCH_THREADS" in table


def test_pairs_in_turns_run_on_the_profiles_cpus(aa, tmp_path):
    pairs_in_turns_on(aa[0], tmp_path / "rep", None)
