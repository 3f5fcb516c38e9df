"""Pairs in turns on one CPU (the design a one-CPU CI runner decides with): the two sides of a pair
on one CPU, their collector loops taking turns; a deadline that a job's cap never cuts; an entry that
takes no turns; a side failing a case in every run; four sides in round-robin pairs. Real asv, real
physics, the demo target."""
import json
import os
import subprocess
import sys

import pytest
from test_duet import CASES, aa_suite, pairs_in_turns_on
from test_suite_asv import ROOT, git, make_suite, run_mbaphases, summary_of, with_cases

from mbaphases.demo_repo import generate

pytestmark = pytest.mark.slow(seconds=230)  # real asv runs: minutes


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return aa_suite(tmp_path_factory.mktemp("turns"))


def test_pairs_in_turns_on_one_cpu_say_the_profile_asked_more(suite, tmp_path):
    pairs_in_turns_on(suite, tmp_path / "rep", min(os.sched_getaffinity(0)))


def test_the_demo_entries_share_a_cpu_in_turns_and_are_profiled_after_the_verdicts(suite, tmp_path):
    """--duet-share-cpu on the demo target (the A/A's sides): each pair on one CPU, every case of
    every run measured in turns with its partner; the function profiles run after the last round,
    never beside a measured run, and only for the cases a candidate FAILs (here every case: the
    gate's threshold raised to 20x, which an A/A cannot clear; 3 runs a side, the fewest that give an
    interval) and the baseline's same cases."""
    pins = (suite / "pins.toml").read_text()
    assert "threshold = 0.90" in pins
    (suite / "pins-fail.toml").write_text(pins.replace("threshold = 0.90", "threshold = 20.0"))
    p = run_mbaphases(suite, "run", "--duet-share-cpu", "--profile", "tiny", "--runs", "3", "--profile-functions",
                      "--machine", "sharebox", "--pins", "pins-fail.toml")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    machine = suite / "raw-runs" / "sharebox"
    metas = [json.loads(m.read_text()) for m in machine.glob("*/run*.meta.json")]
    assert len(metas) == 6
    for m in metas:
        assert m["duet"]["share_cpu"] and not m["failed_cases"], m["failed_cases"]
        doc = json.loads((machine / m["commit"] / f"run{m['run']}.json").read_text())
        assert doc["provenance"]["turns"]["role"] == m["duet"]["role"]
        assert [r["turns"]["partner_met"] for r in doc["results"]] == [True] * len(CASES)
    records = [json.loads(r.read_text()) for r in machine.glob("*/profile/*/profile.json")]
    assert len(records) == 2, p.stdout[-3000:]
    for r in records:
        assert sorted(r["cases"]) == sorted(CASES), r["cases"]
        assert all(row.get("returncode") == 0 for row in r["cases"].values()), r["cases"]
        assert r["started"] >= max(m["ended"] for m in metas), "profiles run after the measured rounds"
    (batch,) = [json.loads(b.read_text()) for b in (machine / "batches").glob("*.json")]
    assert sorted(map(sorted, batch["profiled_cases"].values())) == [sorted(CASES)] * 2, batch["profiled_cases"]


def test_in_turns_no_candidate_failing_means_no_function_profiles(suite, tmp_path):
    """Two runs a side in turns give no interval, so no case is decided and no candidate FAILs one:
    no profile is taken, and the batch says so."""
    p = run_mbaphases(suite, "run", "--duet-share-cpu", "--profile", "tiny", "--runs", "2", "--profile-functions",
                      "--machine", "sharebox-pass")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "[profile] no candidate FAILs a case: no function profiles" in p.stdout, p.stdout[-3000:]
    machine = suite / "raw-runs" / "sharebox-pass"
    assert not list(machine.glob("*/profile/*/profile.json"))
    (batch,) = [json.loads(b.read_text()) for b in (machine / "batches").glob("*.json")]
    assert set(map(len, batch["profiled_cases"].values())) == {0}, batch["profiled_cases"]


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
    (suite / "pins.toml").write_text(with_cases(text, ["sac/g1_walk_flat/mujoco"]))
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


def test_a_deadline_stops_starting_pairs_keeps_every_completed_one_and_the_report_says_what_is_open(suite, tmp_path):
    """--deadline-min on a batch that needs more (one CPU, as a CI runner has): no pair starts that
    would not end in time, estimated from the pairs so far; the completed pairs are kept, the batch
    is resumable, the exit is no failure, and the report says the batch stopped at its deadline."""
    args = ["run", "--design", "turns", "--profile", "tiny", "--runs", "20", "--deadline-min", "0.25",
            "--machine", "deadlinebox"]
    p = subprocess.run(["taskset", "-c", str(min(os.sched_getaffinity(0))), sys.executable, "-m", "mbaphases.cli", *args],
                       cwd=suite,
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
    summary = summary_of(r, tmp_path / "rep")
    assert any("stopped at its deadline" in n for n in summary["notes"]), summary["notes"]


def test_pairs_after_a_failed_case_still_run_one_block_a_slot_and_are_all_recorded(suite):
    """A candidate whose case fails in every run (the field's 1.4.0 on one MotrixSim case): the first
    round's failure is the batch's status, and every later block still waits for a free slot (on a
    slot, a block begins after the one before it ended, whatever it returned); every round is
    recorded."""
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
    spans, slot_of = {}, {}
    for m in metas:
        lo, hi = spans.get(m["duet"]["pair"], (m["started"], m["ended"]))
        spans[m["duet"]["pair"]] = (min(lo, m["started"]), max(hi, m["ended"]))
        slot_of[m["duet"]["pair"]] = m["duet"]["cpu"]
    assert len(spans) == rounds
    for cpu in set(slot_of.values()):
        ordered = sorted(span for pair, span in spans.items() if slot_of[pair] == cpu)
        assert all(later[0] >= earlier[1] for earlier, later in zip(ordered, ordered[1:])), (cpu, ordered)
    record = json.loads(next((suite / "raw-runs" / "brokenturns" / "batches").glob("*.json")).read_text())
    assert record["recorded_runs"] == 2 * rounds


def test_round_robin_pairs_run_each_side_once_a_round_and_every_two_meet(tmp_path):
    """Four sides in round-robin pairs, in turns: each side once a round, every two sides meet once in
    three rounds; a solo batch of the same pins before them is another machine's, and the report finds
    the pairs' own."""
    suite = make_suite(tmp_path, "mba-dev")
    (suite / "pins.toml").write_text(with_cases((ROOT / "pins.toml").read_text(), CASES))  # the demo's six sides
    generate(suite / "demo-target")
    sides = ["MBA dev", "opt reset", "MBA next"]  # with the baseline: 4 sides, 2 pairs a round
    solo = run_mbaphases(suite, "run", "--design", "solo", "--profile", "tiny", "--runs", "1", "--sides", "MBA dev",
                         "--python", sys.executable, "--machine", "solo")
    assert solo.returncode == 0, solo.stdout[-2000:] + solo.stderr[-2000:]
    p = run_mbaphases(suite, "run", "--design", "turns", "--pairing", "round-robin", "--profile", "tiny", "--runs", "3",
                      "--sides", ",".join(sides), "--machine", "rr")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "plan: 2 pairs a round (round-robin" in p.stdout
    batch = json.loads(next((suite / "raw-runs" / "rr" / "batches").glob("*.json")).read_text())
    assert batch["duet"]["pairing"] == "round-robin" and batch["runs_by_side"] == dict.fromkeys(["main direct", *sides], 3)
    metas = [json.loads(m.read_text()) for m in (suite / "raw-runs" / "rr").glob("*/run*.meta.json")]
    assert len(metas) == 12 and batch["recorded_runs"] == 12
    met = [frozenset((m["commit"], m["duet"]["partner"])) for m in metas if m["duet"]["role"] == 0]
    assert len(met) == 6 and len(set(met)) == 6, "in 3 rounds every two of the 4 sides meet once"
    # no --machine: the report reads the machine of the newest run of these pins (the duet's own)
    r = run_mbaphases(suite, "report", "--sides", ",".join(sides), "--out", str(tmp_path / "rep"))
    summary = summary_of(r, tmp_path / "rep")
    assert "machine rr" in summary["input"], summary["input"]


def test_pairs_in_turns_until_decisive_add_a_block_round_while_a_case_is_open(suite):
    """--until-decisive in turns (the main job's program, here on one CPU): three pinned rounds of
    blocks, a look, and a fourth round only while a case is open (--max-runs 4 ends it there); every
    round's block is in the record, its two sides' runs in the machine's store."""
    p = run_mbaphases(suite, "run", "--design", "turns", "--profile", "tiny", "--runs", "3", "--until-decisive",
                      "--max-runs", "4", "--machine", "udturns")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (record,) = [json.loads(b.read_text()) for b in (suite / "raw-runs" / "udturns" / "batches").glob("*.json")]
    assert record["until_decisive"]["max_runs"] == 4
    rounds = sorted(b["block"] for b in record["node"]["blocks"])
    # the look after round 3 decides every case, stops for futility, or adds round 4 (said as it starts)
    added = "[until decisive] round 4:" in p.stdout
    assert rounds == ["r1p1", "r2p1", "r3p1"] + (["r4p1"] if added else []), p.stdout[-3000:]
    said = [line for line in p.stdout.splitlines() if line.startswith("[until decisive]")]
    assert said and (added or "every case decided after 3 runs" in said[-1] or "stopping after look 1" in said[-1]), said
    metas = [json.loads(m.read_text()) for m in (suite / "raw-runs" / "udturns").glob("*/run*.meta.json")]
    assert len(metas) == 2 * len(rounds) and not any(m["failed_cases"] for m in metas)
