"""One baseline and several candidates through real asv at the tiny profile, and
runs added until decisive. Existing-environment mode (this interpreter), two
cases, so the rounds stay short."""
import json
import os
import re
import subprocess
import sys
import tarfile

import pytest
from asv import results as asv_results
from test_suite_asv import ROOT, make_suite, run_mbaphases, summary_of, with_cases

from mbaphases.demo_repo import generate
from mbaphases.inputs import load_asv_conf
from mbaphases.load import load_asv_side

pytestmark = pytest.mark.slow(seconds=190)  # real asv runs, installs or physics over many runs: minutes

CASES = ["sac/g1_walk_flat/mujoco", "sac/g1_motion_tracking/motrix"]
SIDES = [("main", "main direct"), ("mba-dev", "MBA dev"), ("opt/reset", "opt reset"), ("mba-next", "MBA next")]


def sides_pins(sides, runs=2, extra=""):
    text = (ROOT / "pins.toml").read_text()
    head, rest = text.split("[baseline]", 1)
    head = with_cases(head, CASES)
    head = re.sub(r"^runs = \d+", f"runs = {runs}", head, flags=re.M)
    head = "\n".join(line for line in head.splitlines() if not line.startswith("reference")) + "\n" + extra
    head = head.replace('design = "turns"', 'design = "solo"')  # asv's own interleaving of the sides, tested here
    rest = rest[rest.index("# the field's formal baseline"):]
    (bref, blabel), *cands = sides
    body = f'[baseline]\nref = "{bref}"\nlabel = "{blabel}"\n\n'
    for ref, label in cands:
        body += f'[[candidates]]\nref = "{ref}"\nlabel = "{label}"\n'
        if label == "MBA next":
            body += 'combines = ["opt reset"]\n'
        body += "\n"
    return head + body + rest


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    suite = make_suite(tmp_path_factory.mktemp("many"), "mba-dev")
    (suite / "pins.toml").write_text(sides_pins(SIDES, extra='reference = "MBA dev"\n'))
    shas = generate(suite / "demo-target")
    p = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable, "--machine", "sidebox")
    return suite, shas, p


def test_every_side_runs_in_every_round_in_alternating_order(many):
    suite, shas, p = many
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    order = re.findall(r"\[round (\d)/2\] ([^:]+) \(", p.stdout)
    labels = [label for _, label in SIDES]
    assert [lbl for r, lbl in order if r == "1"] == labels
    assert [lbl for r, lbl in order if r == "2"] == labels[::-1]
    for ref, _ in SIDES:
        assert p.stdout.count(shas[ref]) >= 1, "the resolved SHAs are printed first"
        metas = list((suite / "raw-runs" / "sidebox" / shas[ref]).glob("run*.meta.json"))
        assert len(metas) == 2
    (record,) = (suite / "raw-runs" / "sidebox" / "batches").glob("*.json")
    rec = json.loads(record.read_text())
    assert rec["recorded_runs"] == 8 and 0 < rec["entry_share"] <= 1
    assert "inside the entry processes" in p.stdout


def test_report_per_candidate_with_ledger(many, tmp_path):
    suite, shas, _ = many
    r = run_mbaphases(suite, "report", "--out", str(tmp_path / "rep"), "--html", str(tmp_path / "html" / "m"),
                      "--machine", "sidebox", "--min-runs", "2")
    s = summary_of(r, tmp_path / "rep")
    assert s["schema"] == "mbaphases.summary/5"
    assert [c["label"] for c in s["candidates"]] == ["MBA dev", "opt reset", "MBA next"]
    for c in s["candidates"]:
        one = json.loads((tmp_path / "rep" / c["summary"]).read_text())
        assert one["candidate"]["label"] == c["label"] and one["baseline"]["revision"] == shas["main"]
        assert {x["case"] for x in one["cases"]} == set(CASES)
    ledger = s["ledger"]
    assert ledger["reference"] == "MBA dev"
    assert {(row["candidate"], row["case"]) for row in ledger["rows"]} == {
        (c, case) for c in ("opt reset", "MBA next") for case in CASES}
    assert {a["combined"] for a in ledger["additivity"]} == {"MBA next"}
    assert ledger["history"][0] == "MBA dev" and ledger["history"][-1] == "MBA next"
    page = (tmp_path / "html" / "m" / "index.html").read_text()
    assert 'href="mba-dev/index.html"' in page and "Ledger" in page and "History" in page
    assert (tmp_path / "html" / "m" / "mba-next" / "index.html").is_file()


@pytest.mark.parametrize("args, needle", [
    (["--sides", "nobody"], "--sides 'nobody' is not a side"),
])
def test_bad_sides(many, args, needle):
    suite, _, _ = many
    r = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable, "--machine", "sidebox", *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_candidates_on_one_commit_or_with_one_label_are_refused(tmp_path):
    suite = make_suite(tmp_path, "mba-dev")
    generate(suite / "demo-target")
    (suite / "pins.toml").write_text(sides_pins([("main", "a"), ("mba-dev", "b"), ("mba-dev", "c")]))
    r = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable)
    assert r.returncode == 2 and "same commit" in r.stderr
    (suite / "pins.toml").write_text(sides_pins([("main", "a"), ("mba-dev", "b"), ("opt/reset", "b")]))
    r = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable)
    assert r.returncode == 2 and "'b' names more than one side" in r.stderr
    (suite / "pins.toml").write_text(sides_pins([("main", "a"), ("mba-dev", "b")], extra='reference = "zz"\n'))
    r = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable)
    assert r.returncode == 2 and "reference 'zz' is not a candidate" in r.stderr


def test_until_decisive_adds_rounds_then_stops_at_max_runs_or_budget(tmp_path):
    suite = make_suite(tmp_path, "mba-dev")
    (suite / "pins.toml").write_text(sides_pins(SIDES[:2], runs=1))
    generate(suite / "demo-target")
    # one run a side cannot give a 90% interval: every case stays open, so a round is added
    r = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable, "--machine", "ud",
                      "--until-decisive", "--max-runs", "2")
    assert "INCONCLUSIVE" in r.stdout and "stopping at --max-runs 2" in r.stdout, r.stdout[-3000:]
    recs = list((suite / "raw-runs" / "ud" / "batches").glob("*.json"))
    rec = json.loads(recs[0].read_text())
    assert rec["runs_per_side"] == 2 and rec["looks"] == 2 and rec["until_decisive"]["planned_looks"] == 2
    # pairs in turns: one or two pairs give no signed-rank interval at any usual confidence, so
    # neither look can decide and no error is spent
    assert rec["until_decisive"]["counted_looks"] == 0 and rec["until_decisive"]["confidence"] == pytest.approx(0.90)
    assert "1 runs a side: none (too few), 2 runs a side: none (too few)" in r.stdout
    rep = run_mbaphases(suite, "report", "--out", str(tmp_path / "rep"), "--machine", "ud", "--min-runs", "2")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "2 look(s) taken of 2 planned, the error spent over 0 (the looks too small" in md, rep.stderr
    assert "90% interval" in md
    r = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable, "--machine", "ud2",
                      "--until-decisive", "--max-runs", "5", "--budget-min", "0.001")
    assert "time budget" in r.stdout and len(list((suite / "raw-runs" / "ud2").glob("*/run*.meta.json"))) == 2


def test_evidence_bundle_rebuilds_the_same_tables(many, tmp_path):
    suite, shas, _ = many
    b = run_mbaphases(suite, "bundle", "--out", str(tmp_path / "evidence.tar.gz"), "--machine", "sidebox",
                      "--min-runs", "2")
    assert "bundle:" in b.stdout, b.stderr
    with tarfile.open(tmp_path / "evidence.tar.gz") as tar:
        names = tar.getnames()
    assert "bundle/SHA256SUMS" in names and "bundle/report/summary.json" in names
    assert any(n.endswith(f"{shas['mba-next']}/run2.meta.json") for n in names)
    assert (tmp_path / "evidence.tar.gz").stat().st_size < 5 * 1024 * 1024
    r = run_mbaphases(tmp_path, "report", "--bundle", str(tmp_path / "evidence.tar.gz"), "--out",
                      str(tmp_path / "again"), "--min-runs", "2")
    with tarfile.open(tmp_path / "evidence.tar.gz") as tar:
        tar.extractall(tmp_path / "x", filter="data")
    first = summary_of(b, tmp_path / "x" / "bundle" / "report")  # the bundle exits with its report's verdict
    again = summary_of(r, tmp_path / "again")
    assert first["ledger"]["rows"] == again["ledger"]["rows"]
    for c in first["candidates"]:
        one = json.loads((tmp_path / "x" / "bundle" / "report" / c["summary"]).read_text())
        two = json.loads((tmp_path / "again" / c["summary"]).read_text())
        assert [x["throughput"] for x in one["cases"]] == [x["throughput"] for x in two["cases"]]
        assert [x["gate"] for x in one["cases"]] == [x["gate"] for x in two["cases"]]
    # a bundle whose content no longer matches its checksums is refused
    summary = tmp_path / "x" / "bundle" / "report" / "summary.json"
    summary.write_text(summary.read_text().replace("MBA", "XBA"))
    with tarfile.open(tmp_path / "tampered.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "x" / "bundle", arcname="bundle")
    r = run_mbaphases(tmp_path, "report", "--bundle", str(tmp_path / "tampered.tar.gz"), "--out", str(tmp_path / "t"))
    assert r.returncode == 2 and "does not match its checksum" in r.stderr


def test_profiled_runs_stay_outside_the_measured_ones(tmp_path):
    """--profile-functions: one extra run per side and case under py-spy, after that side's first
    measured run ended, in processes of its own; asv's samples and the raw runs are the measured
    runs only, and no measured run had a profiler attached."""
    suite = make_suite(tmp_path, "mba-dev")
    # 50 Hz: the test is about where the profiled runs sit, not their detail (py-spy stops the
    # target for every native unwind, so the default 500 Hz makes these runs the slowest of the suite)
    (suite / "pins.toml").write_text(sides_pins(SIDES[:2], runs=2, extra="profile_rate_hz = 50\n"))
    shas = generate(suite / "demo-target")
    p = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable, "--machine", "pbox",
                      "--profile-functions")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for ref, _ in SIDES[:2]:
        raw = suite / "raw-runs" / "pbox" / shas[ref]
        metas = sorted(raw.glob("run*.meta.json"))
        assert len(metas) == 2
        for m in metas:
            cmd = json.loads(m.read_text())["command"]
            assert not any("py-spy" in str(x) for x in cmd) and cmd[1].endswith("benchmark_offpolicy_collector_active.py")
        (record,) = raw.glob("profile/*/profile.json")
        doc = json.loads(record.read_text())
        first = json.loads((raw / "run1.meta.json").read_text())
        assert doc["started"] >= first["ended"]
        assert set(doc["cases"]) == set(CASES)
        for row in doc["cases"].values():
            assert row["returncode"] == 0 and "py-spy" in row["command"][0]
            assert (record.parent / row["folded"]).stat().st_size > 0
        (res,) = asv_results.iter_results_for_machine_and_hash(str(suite / "results"), "pbox", shas[ref][:8])
        key = "collector.CollectorActive.entry_time_per_million_steps"
        assert all(len(s) == 2 for s in res.get_result_samples(key, res.get_result_params(key)))


def test_a_machine_of_other_hardware_is_never_appended_to(tmp_path):
    """Runs stored under a machine name were measured on another CPU: `mbaphases run` refuses with
    one line, plain asv stops before it stores anything (a failed result would replace the samples
    asv kept), and --allow-other-hardware appends, the report then keeping the hardwares apart."""


    suite = make_suite(tmp_path, "mba-dev")
    (suite / "pins.toml").write_text(sides_pins(SIDES[:2], runs=1))
    shas = generate(suite / "demo-target")
    assert run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable, "--machine", "hw").returncode == 0
    for meta in (suite / "raw-runs" / "hw").glob("*/run1.meta.json"):
        doc = json.loads(meta.read_text())
        doc["environment"]["cpu"] = "AMD EPYC 9654"  # as if measured on another host
        meta.write_text(json.dumps(doc))

    def stored():
        metas = sorted(str(p) for p in (suite / "raw-runs" / "hw").glob("*/run*.meta.json"))
        (res,) = asv_results.iter_results_for_machine_and_hash(str(suite / "results"), "hw", shas["main"][:8])
        key = "collector.CollectorActive.entry_time_per_million_steps"
        return metas, res.get_result_samples(key, res.get_result_params(key))

    before = stored()
    p = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable, "--machine", "hw")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "AMD EPYC 9654" in p.stderr
    # plain asv, as `mbaphases run --python` calls it for one side, without the runner's permission
    conf = load_asv_conf(suite / "asv.conf.json")
    (suite / "one.json").write_text(json.dumps({**conf, "branches": [shas["main"]]}))
    env = {**os.environ, "MBAPHASES_PROFILE": "tiny", "MBAPHASES_TARGET_DIR": str(suite / ".asv" / "worktrees" / shas["main"]),
           "MBAPHASES_COMMIT": shas["main"], "MBAPHASES_LOCK": str(suite / "formal.lock")}
    q = subprocess.run([sys.executable, "-m", "asv", "run", "--config", "one.json", "--machine", "hw", "--record-samples",
                        "--append-samples", "-E", f"existing:{sys.executable}", "--set-commit-hash", shas["main"],
                        "-a", "rounds=1"], cwd=suite, env=env, capture_output=True, text=True, timeout=600)
    assert q.returncode != 0 and "other hardware" in q.stdout + q.stderr
    assert stored() == before, "nothing stored, nothing replaced"
    p = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable, "--machine", "hw",
                      "--allow-other-hardware")
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(stored()[0]) == 4
    r = run_mbaphases(suite, "report", "--out", str(tmp_path / "rep"), "--machine", "hw", "--min-runs", "1", "--quiet")
    assert r.returncode == 1, r.stderr
    top = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert len(top["hardware"]) == 2 and {h["verdict"] for h in top["hardware"]} <= {"PASS", "FAIL", "INCONCLUSIVE"}


def test_a_later_failed_run_keeps_every_earlier_run_and_its_batch(tmp_path):
    """A case that fails in a later batch: asv's store may drop that case's earlier samples, the
    raw runs keep them; the loader reads the raw runs, so every earlier run keeps its value and
    its batch, and the failure is the later run's."""

    suite = make_suite(tmp_path, "mba-dev")
    (suite / "pins.toml").write_text(sides_pins(SIDES[:2], runs=1))
    shas = generate(suite / "demo-target")
    args = ("run", "--profile", "tiny", "--python", sys.executable, "--machine", "latebox")
    first = run_mbaphases(suite, *args)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    # the candidate's checkout breaks between batches: its MotrixSim case now fails in the physics step
    owner = suite / ".asv" / "worktrees" / shas["mba-dev"] / "conf" / "sac" / "task" / "g1_motion_tracking" / "motrix.yaml"
    owner.write_text(owner.read_text() + "task:\n  decimation: 0\n")
    second = run_mbaphases(suite, *args)
    assert second.returncode != 0 and "FAILED" in second.stdout, second.stdout[-3000:]
    broken = "sac/g1_motion_tracking/motrix"
    side = load_asv_side("MBA dev", shas["mba-dev"], suite / "results", "latebox", suite / "demo-target")
    thr = side.values[side.values.metric == "throughput"]
    assert sorted(thr[thr.case == broken].run) == ["run1"]
    assert sorted(thr[thr.case == CASES[0]].run) == ["run1", "run2"]
    assert list(side.failed.run[side.failed.case == broken]) == ["run2"]
    assert len(set(side.batches.values())) == 2 and set(side.batches) == {"run1", "run2"}
    (res,) = asv_results.iter_results_for_machine_and_hash(str(suite / "results"), "latebox", shas["mba-dev"][:8])
    key = "collector.CollectorActive.entry_time_per_million_steps"
    stored = dict(zip(res.get_result_params(key)[0], res.get_result_samples(key, res.get_result_params(key))))
    kept = [v for v in stored[f"'{broken}'"] or [] if v is not None]
    # whatever asv kept, the side says so when it is less than the raw runs
    assert len(kept) == 1 or any("asv's store keeps" in n for n in side.notes), (kept, side.notes)
    rep = run_mbaphases(suite, "report", "--out", str(tmp_path / "rep"), "--machine", "latebox", "--min-runs", "1")
    summary = summary_of(rep, tmp_path / "rep")
    assert [c["case"] for c in summary["cases"]] and summary["counts"]


def test_runs_disturbed_by_another_process_get_one_replacement_round(tmp_path):
    """Real CPU hogs (other processes on half the CPUs) while the pinned runs run: every run is
    flagged BUSY and kept; --until-decisive runs one replacement round for the flagged sides and
    records it; the report's gate says whether each verdict holds without the flagged runs."""
    suite = make_suite(tmp_path, "mba-dev")
    (suite / "pins.toml").write_text(sides_pins(SIDES[:2], runs=1))
    generate(suite / "demo-target")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(max(1, (os.cpu_count() or 2) // 2 + 1))]
    try:
        r = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable, "--machine", "hog",
                          "--until-decisive", "--max-runs", "2")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert "BUSY" in r.stdout, r.stdout[-3000:]
    assert "replacement round for flagged runs: main direct, MBA dev" in r.stdout, r.stdout[-3000:]
    (rec,) = (suite / "raw-runs" / "hog" / "batches").glob("*.json")
    doc = json.loads(rec.read_text())
    assert doc["replacement_round"] == {"round": 2, "sides": ["main direct", "MBA dev"]}
    assert doc["runs_by_side"] == {"main direct": 2, "MBA dev": 2}
    rep = run_mbaphases(suite, "report", "--out", str(tmp_path / "rep"), "--machine", "hog", "--min-runs", "1")
    summary = summary_of(rep, tmp_path / "rep")
    flagged = [c["gate_detail"]["flagged_runs"] for c in summary["cases"]]
    assert all(n >= 1 for n in flagged), flagged
    assert all(c["gate_detail"]["without_flagged"] for c in summary["cases"])
