"""Duet runs (mbaphases run --duet): the two sides of a pair at the same time, one CPU each, every
pool at one thread, each case started together; the gate decides on the paired ratios. Real asv,
real physics, the demo target; an A/A (the same code under two commits) must not FAIL."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from test_suite_asv import ROOT, git, make_suite, run_mbaphases

from mbaphases.demo_repo import generate

pytestmark = pytest.mark.slow  # real asv runs: minutes

CASES = ["sac/g1_walk_flat/mujoco", "flashsac/g1_walk_flat/motrix"]
ROUNDS = 8


def aa_pins(suite) -> None:
    """main against a commit of the same tree (an empty commit on top), two cases, a profile long
    enough that a run's figure is not one scheduler tick."""
    text = (suite / "pins.toml").read_text()
    text = text.replace('ref = "mba-dev"', 'ref = "aa"').replace('label = "MBA dev"', 'label = "main again"')
    head, rest = text.split("cases = [", 1)
    rest = rest[rest.index("]") + 1:]
    text = head + "cases = [" + ", ".join(f'"{c}"' for c in CASES) + "]" + rest
    text += ('\n[profiles.aa]\nnum_envs = 8\nwarmup_steps = 3\nmeasure_steps = 40\nreplay_capacity_steps = 4\n'
             'torch_threads = 1\noverrides = ["sim.nthread=1"]\n')
    (suite / "pins.toml").write_text(text)


@pytest.fixture(scope="module")
def aa(tmp_path_factory):
    suite = make_suite(tmp_path_factory.mktemp("duet"), "aa")
    generate(suite / "demo-target")
    repo = suite / "demo-target"
    for args in (["checkout", "-q", "-b", "aa", "main"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "the same tree"],
                 ["checkout", "-q", "main"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    aa_pins(suite)
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
    assert r.returncode in (0, 1), r.stderr
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    for case in summary["cases"]:
        assert case["gate"] != "FAIL", case  # the same code cannot be 10% slower than itself
        assert f"paired over {ROUNDS} duet pairs" in case["gate_detail"]["note"], case["gate_detail"]
    batch = json.loads(next((suite / "raw-runs" / "duetbox" / "batches").glob("*.json")).read_text())
    assert batch["duet"]["pairs"] == [["main direct", "main again"]]


def test_a_batch_plans_its_steps_and_rounds_from_the_machines_earlier_pairs(aa):
    """A second duet batch on a machine that holds the A/A's eight pairs: before its runs it says
    where their variance sat and which steps and rounds reach the target at the least time, and
    its batch record keeps that plan."""
    suite, first = aa
    assert first.returncode == 0
    shutil.copytree(suite / "raw-runs" / "duetbox", suite / "raw-runs" / "planbox",
                    ignore=shutil.ignore_patterns("batches"))
    p = run_mbaphases(suite, "run", "--duet", "--profile", "aa", "--runs", "2", "--machine", "planbox")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    said = [line for line in p.stdout.splitlines() if line.startswith("allocation")]
    assert said[0].startswith(f"allocation (duet (star), from {ROUNDS} earlier pairs a case on this machine)"), said
    (record,) = [json.loads(r.read_text()) for r in (suite / "raw-runs" / "planbox" / "batches").glob("*.json")]
    plan = record["allocation"]
    assert sorted(x["case"] for x in plan["cases"]) == sorted(CASES)
    assert all(x["runs"] == ROUNDS and x["window_sd"] > 0 for x in plan["cases"])  # the A/A's pairs, not its own
    assert plan["now"] == {**plan["now"], "measure_steps": 40, "runs": 2}
    assert plan["least_time"] is None or plan["least_time"]["median_half_width"] <= plan["target_half_width"]


def test_the_demo_entries_share_a_cpu_in_turns_and_are_profiled_after_the_rounds(aa, tmp_path):
    """--duet-share-cpu on the demo target (the A/A's sides): each pair on one CPU, every case of
    every run measured in turns with its partner; the function profiles run after the last round,
    never beside a measured run."""
    suite, _ = aa
    p = run_mbaphases(suite, "run", "--duet-share-cpu", "--profile", "tiny", "--runs", "2", "--profile-functions",
                      "--machine", "sharebox")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    machine = suite / "raw-runs" / "sharebox"
    metas = [json.loads(m.read_text()) for m in machine.glob("*/run*.meta.json")]
    assert len(metas) == 4
    for m in metas:
        assert m["duet"]["share_cpu"] and not m["failed_cases"], m["failed_cases"]
        doc = json.loads((machine / m["commit"] / f"run{m['run']}.json").read_text())
        assert doc["provenance"]["turns"]["role"] == m["duet"]["role"]
        assert [r["turns"]["partner_met"] for r in doc["results"]] == [True] * len(CASES)
    records = [json.loads(r.read_text()) for r in machine.glob("*/profile/*/profile.json")]
    assert len(records) == 2, "each side profiled once"
    for r in records:
        assert all(row.get("returncode") == 0 for row in r["cases"].values()), r["cases"]
        assert r["started"] >= max(m["ended"] for m in metas), "profiles run after the measured rounds"


def test_round_robin_duets_run_each_side_once_a_round_and_every_two_meet(tmp_path):
    suite = make_suite(tmp_path, "mba-dev")
    (suite / "pins.toml").write_text((ROOT / "pins.toml").read_text())  # the demo's six sides
    generate(suite / "demo-target")
    sides = ["MBA dev", "opt reset", "MBA next"]  # with the baseline: 4 sides, 2 pairs a round
    solo = run_mbaphases(suite, "run", "--design", "solo", "--profile", "tiny", "--runs", "1", "--sides", "MBA dev",
                         "--python", sys.executable, "--machine", "solo")
    assert solo.returncode == 0, solo.stdout[-2000:] + solo.stderr[-2000:]
    p = run_mbaphases(suite, "run", "--design", "pairs", "--pairing", "round-robin", "--profile", "tiny", "--runs", "3",
                      "--sides", ",".join(sides), "--machine", "rr")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "plan: 2 pairs a round (round-robin)" in p.stdout
    batch = json.loads(next((suite / "raw-runs" / "rr" / "batches").glob("*.json")).read_text())
    assert batch["duet"]["pairing"] == "round-robin" and batch["runs_by_side"] == dict.fromkeys(["main direct", *sides], 3)
    metas = [json.loads(m.read_text()) for m in (suite / "raw-runs" / "rr").glob("*/run*.meta.json")]
    assert len(metas) == 12 and batch["recorded_runs"] == 12
    met = [frozenset((m["commit"], m["duet"]["partner"])) for m in metas if m["duet"]["role"] == 0]
    assert len(met) == 6 and len(set(met)) == 6, "in 3 rounds every two of the 4 sides meet once"
    # no --machine: the report reads the machine of the newest run of these pins (the duet's own)
    r = run_mbaphases(suite, "report", "--sides", ",".join(sides), "--out", str(tmp_path / "rep"))
    assert r.returncode in (0, 1), r.stderr
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert "machine rr" in summary["input"], summary["input"]


def test_sharing_a_cpu_needs_an_entry_that_takes_turns(tmp_path):
    """An entry that runs its loop without turns (here the demo target's entry with its hook for the
    protocol renamed away, as a user's own entry may be): beside its partner on one CPU, not in
    turns, so every case of every run is a failed case naming why (never a measurement)."""
    suite = make_suite(tmp_path, "mba-dev-own")
    repo = suite / "demo-target"
    generate(repo)
    bench = repo / "src" / "reflab" / "bench.py"
    for branch in ("main", "mba-dev"):
        git(repo, "checkout", "-q", "-b", f"{branch}-own", branch)
        text = bench.read_text()
        assert 'TURNS_MODULE_ENV = "MBAPHASES_TURNS_MODULE"' in text
        bench.write_text(text.replace('TURNS_MODULE_ENV = "MBAPHASES_TURNS_MODULE"', 'TURNS_MODULE_ENV = "NO_TURNS_HERE"'))
        git(repo, "commit", "-qam", "an entry of its own, without turns")
    git(repo, "checkout", "-q", "main")
    text = (suite / "pins.toml").read_text().replace('ref = "main"', 'ref = "main-own"')
    head, rest = text.split("cases = [", 1)
    (suite / "pins.toml").write_text(head + 'cases = ["sac/g1_walk_flat/mujoco"]' + rest[rest.index("]") + 1:])
    p = run_mbaphases(suite, "run", "--duet-share-cpu", "--profile", "tiny", "--runs", "1", "--sides", "MBA dev",
                      "--machine", "shared")
    assert p.returncode != 0
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 2 and all("did not take turns" in line for line in failed), p.stdout[-3000:]
    metas = [json.loads(m.read_text()) for m in (suite / "raw-runs" / "shared").glob("*/run*.meta.json")]
    assert len(metas) == 2 and all(m["duet"]["share_cpu"] for m in metas)
    assert len({m["duet"]["cpu"] for m in metas}) == 1, "the pair's two sides on one CPU"
    batch = json.loads(next((suite / "raw-runs" / "shared" / "batches").glob("*.json")).read_text())
    assert batch["duet"]["share_cpu"] is True


@pytest.mark.parametrize("cpus", [None, "0"])
def test_pairs_in_turns_run_on_the_profiles_cpus_and_on_one_cpu_say_the_profile_asked_more(aa, tmp_path, cpus):
    """A profile of two threads: a pair in turns takes both CPUs (one slot of two), each side the pinned
    program (two torch threads); under a one-CPU affinity (a one-CPU CI runner) the same command takes
    turns on that CPU, every pool at one thread, the plan saying the profile asked for two and the report
    saying it on every verdict. Each run records the CPUs it had and its pools."""
    suite, _ = aa
    pins = suite / "pins.toml"
    if "[profiles.aa2]" not in pins.read_text():
        pins.write_text(pins.read_text() + '\n[profiles.aa2]\nnum_envs = 8\nwarmup_steps = 1\nmeasure_steps = 10\n'
                        'replay_capacity_steps = 4\ntorch_threads = 2\noverrides = ["sim.nthread=1"]\n')
    machine = f"two-thread-{cpus or 'all'}"
    args = ["run", "--design", "turns", "--profile", "aa2", "--runs", "2", "--machine", machine]
    prefix = ["taskset", "-c", cpus] if cpus else []
    p = subprocess.run([*prefix, sys.executable, "-m", "mbaphases.cli", *args], cwd=suite, capture_output=True,
                       text=True, timeout=1200, env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock")})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    have = [0] if cpus else sorted(os.sched_getaffinity(0))[:2]
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
    r = run_mbaphases(suite, "report", "--machine", machine, "--min-runs", "2", "--out", str(tmp_path / "rep"),
                      env={"MBAPHASES_PROFILE": "aa2"})
    assert r.returncode in (0, 1), r.stderr
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    notes = [c["gate_detail"]["note"] for c in summary["cases"]]
    assert notes and all(("the profile asks for 2" in n) == short for n in notes), notes
    assert all(c["gate"] in ("PASS", "INCONCLUSIVE") for c in summary["cases"]), summary["cases"]  # an A/A
    table = (tmp_path / "rep" / "report.md").read_text()
    assert "cpus.affinity" in table and "cpus.pools.UNILAB_COLLECTOR_TORCH_THREADS" in table


def test_a_deadline_stops_starting_pairs_keeps_every_completed_one_and_the_report_says_what_is_open(aa, tmp_path):
    """--deadline-min on a batch that needs more (one CPU, as a CI runner has): no pair starts that
    would not end in time, estimated from the pairs so far; the completed pairs are kept, the batch
    is resumable, the exit is no failure, and the report says the batch stopped at its deadline."""
    suite, _ = aa
    args = ["run", "--design", "turns", "--profile", "tiny", "--runs", "20", "--deadline-min", "0.5",
            "--machine", "deadlinebox"]
    p = subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "mbaphases.cli", *args], cwd=suite,
                       capture_output=True, text=True, timeout=1200,
                       env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock")})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "[deadline] not starting" in p.stdout and "stopped at the deadline" in p.stdout
    record = json.loads(next((suite / "raw-runs" / "deadlinebox" / "batches").glob("*.json")).read_text())
    assert record["state"] == "deadline" and record["deadline"]["not_started"] > 0
    metas = [json.loads(m.read_text()) for m in (suite / "raw-runs" / "deadlinebox").glob("*/run*.meta.json")]
    pairs = {m["duet"]["pair"] for m in metas}
    assert 2 * len(pairs) == len(metas) == record["recorded_runs"] and len(pairs) + record["deadline"]["not_started"] == 20
    assert all(m["started"] < record["deadline"]["at"] for m in metas), "no pair starts past the deadline"
    r = run_mbaphases(suite, "report", "--machine", "deadlinebox", "--out", str(tmp_path / "rep"),
                      env={"MBAPHASES_PROFILE": "tiny"})
    assert r.returncode in (0, 1), r.stderr
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert any("stopped at its deadline" in n for n in summary["notes"]), summary["notes"]


def test_pairs_after_a_failed_case_still_run_one_wave_at_a_time_and_are_all_recorded(aa):
    """A candidate whose case fails in every run (the field's 1.4.0 on one MotrixSim case): the first
    round's failure is the batch's status, and every later round still waits for its pair's end
    before the next begins; every round is recorded, none overlaps another."""
    suite, _ = aa
    repo = suite / "demo-target"
    if "broken" not in subprocess.run(["git", "-C", str(repo), "branch"], capture_output=True, text=True).stdout:
        git(repo, "checkout", "-q", "-b", "broken", "aa")
        owner = repo / "conf" / "flashsac" / "task" / "g1_walk_flat" / "motrix.yaml"
        owner.write_text(owner.read_text() + "task:\n  decimation: 0\n")  # composes, fails in the physics step
        git(repo, "commit", "-qam", "broken flashsac g1 walk on motrix")
        git(repo, "checkout", "-q", "main")
    pins = suite / "pins.broken.toml"
    pins.write_text((suite / "pins.toml").read_text().replace('ref = "aa"', 'ref = "broken"'))
    rounds = 3
    p = run_mbaphases(suite, "run", "--pins", str(pins), "--design", "turns", "--profile", "tiny", "--runs", str(rounds),
                      "--machine", "brokenturns")
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    metas = [json.loads(m.read_text()) for m in (suite / "raw-runs" / "brokenturns").glob("*/run*.meta.json")]
    assert len(metas) == 2 * rounds, p.stdout[-3000:]
    failing = [m for m in metas if m["failed_cases"]]
    assert len(failing) == rounds and all(list(m["failed_cases"]) == ["flashsac/g1_walk_flat/motrix"] for m in failing)
    spans = {}
    for m in metas:
        lo, hi = spans.get(m["duet"]["pair"], (m["started"], m["ended"]))
        spans[m["duet"]["pair"]] = (min(lo, m["started"]), max(hi, m["ended"]))
    ordered = sorted(spans.values())
    assert len(ordered) == rounds
    assert all(later[0] >= earlier[1] for earlier, later in zip(ordered, ordered[1:])), ordered
    record = json.loads(next((suite / "raw-runs" / "brokenturns" / "batches").glob("*.json")).read_text())
    assert record["recorded_runs"] == 2 * rounds
