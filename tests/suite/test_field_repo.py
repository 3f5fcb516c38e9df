"""The field's repository, unchanged: a generated field-shaped repository (uv project,
committed uv.lock with physics extras, entry and configs where each era put them, no
runtime key, the field's JSON) driven by the field profile, sides pinned by SHA.
Real git, real uv, real asv, real physics at the tiny profile, two cases."""
import json
import subprocess
import sys

import pytest
from asv import results as asv_results
from test_suite_asv import make_suite, run_mbaphases, summary_of, with_cases
from test_suite_sides import CASES

from mbaphases.demo_repo import generate_field

pytestmark = pytest.mark.slow(seconds=85)  # real asv runs, installs or physics over many runs: minutes

METRIC = "collector.CollectorActive.entry_time_per_million_steps"


def field_suite(tmp, extra=""):
    suite = make_suite(tmp, "mba-dev")
    pins = (suite / "pins.field.toml").read_text()
    pins = with_cases(pins, CASES)
    (suite / "pins.field.toml").write_text(pins + extra)
    return suite


@pytest.fixture(scope="module")
def field(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("field")
    shas = generate_field(tmp / "field-repo")
    return tmp, shas


def run_field(suite, repo, base, cand, *extra, runs="1", machine="fieldpy"):
    return run_mbaphases(suite, "run", "--field-repo", str(repo), "--pins", "pins.field.toml", "--profile", "tiny",
                         "--runs", runs, "--baseline", base, "--candidate", cand, "--machine", machine, *extra,
                         timeout=2400)


def test_field_profile_by_sha_installs_each_side_from_its_lock(field, tmp_path):
    tmp, shas = field
    suite = field_suite(tmp_path)
    p = run_field(suite, tmp / "field-repo", shas["field-direct"], shas["field-mba"], runs="3", machine="fieldvenv")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    first = p.stdout.splitlines()[:2]
    assert shas["field-direct"] in first[0] and shas["field-mba"] in first[1], "resolved SHAs are printed first"
    locks = set()
    for tag in ("field-direct", "field-mba"):
        (res,) = asv_results.iter_results_for_machine_and_hash(str(suite / "results-field"), "fieldvenv", shas[tag][:8])
        assert [len(s) for s in res.get_result_samples(METRIC, res.get_result_params(METRIC))] == [3, 3]
        metas = sorted((suite / "raw-runs" / "fieldvenv" / shas[tag]).glob("run*.meta.json"))
        meta = json.loads(metas[0].read_text())
        install = meta["environment"]["install"]
        assert install["installer"] == "uv.lock" and install["extras"] == ["mujoco", "motrix"]
        assert install["installed"]["torch"].startswith("2.13.0") and "mujoco-uni-runtime" in install["installed"]
        assert meta["entry"]["path"] == "scripts/benchmark/rl/benchmark_offpolicy_collector_active.py"
        assert meta["entry"]["checkout"].endswith("/project")
        raw_text = metas[0].with_name("run1.json").read_text()
        assert '"cpu_util_pct": NaN' in raw_text and "provenance" not in json.loads(raw_text)  # as the field writes
        locks.add(install["lock_sha256"])
    assert len(locks) == 2, "each side's own lock (the project version differs)"
    r = run_mbaphases(suite, "report", "--config", "asv.field.resolved.conf.json", "--pins", "pins.field.toml",
                      "--baseline", "field-direct", "--candidate", "field-mba", "--machine", "fieldvenv",
                      "--out", str(tmp_path / "rep"))
    s = summary_of(r, tmp_path / "rep")
    assert "MISSING" not in s["counts"] and "MISALIGNED" not in s["counts"], s["counts"]
    assert "install.lock_sha256" in s["environment"]["differences"]
    assert any("bare NaN" in n for n in s["baseline"]["notes"]), s["baseline"]["notes"]


def test_a_definition_change_is_misaligned(field, tmp_path):
    tmp, shas = field
    suite = field_suite(tmp_path)
    p = run_field(suite, tmp / "field-repo", shas["field-direct"], shas["field-extra-phase"], "--python", sys.executable)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    run_mbaphases(suite, "report", "--config", "asv.field.resolved.conf.json", "--pins", "pins.field.toml",
                      "--baseline", shas["field-direct"], "--candidate", shas["field-extra-phase"],
                      "--machine", "fieldpy", "--min-runs", "1", "--out", str(tmp_path / "rep"))
    s = json.loads((tmp_path / "rep" / "summary.json").read_text())
    for case in s["cases"]:
        assert case["gate"] == "MISALIGNED", case
        note = case["gate_detail"]["note"]
        assert "definition of the active window" in note and "action_select_ms" in note


def test_the_older_layout_runs_and_each_side_measures_its_own_code(field, tmp_path):
    tmp, shas = field
    suite = field_suite(tmp_path)
    p = run_field(suite, tmp / "field-repo", shas["field-old-layout"], shas["field-mba"], "--python", sys.executable)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    seen = {}
    for tag in ("field-old-layout", "field-mba"):
        meta_path = suite / "raw-runs" / "fieldpy" / shas[tag] / "run1.meta.json"
        meta = json.loads(meta_path.read_text())
        doc = json.loads(meta_path.with_name("run1.json").read_text().replace("NaN", "null"))
        seen[tag] = (meta["entry"]["path"], doc["device"]["package"], {r["case"]["variant"] for r in doc["results"]})
    # one interpreter, yet each side imported its own checkout: other versions, other runtimes
    assert seen["field-old-layout"] == ("benchmark/rl/benchmark_offpolicy_collector_active.py", "reflab 0.1.0", {"direct"})
    assert seen["field-mba"] == ("scripts/benchmark/rl/benchmark_offpolicy_collector_active.py", "reflab 0.4.0", {"mba"})


def test_field_bad_input(field, tmp_path):
    tmp, shas = field
    suite = field_suite(tmp_path)
    r = run_field(suite, tmp / "field-repo", "60c2ce7c", shas["field-mba"], "--python", sys.executable)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "'60c2ce7c'" in lines[0] and "field-repo" in lines[0]
    # a target without any known entry path: every case fails naming the paths tried
    bare = tmp_path / "bare"
    subprocess.run(["git", "clone", "-q", str(tmp / "field-repo"), str(bare)], check=True)
    subprocess.run(["git", "-C", str(bare), "rm", "-rq", "scripts"], check=True)
    subprocess.run(["git", "-C", str(bare), "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm",
                    "no entry"], check=True)
    head = subprocess.run(["git", "-C", str(bare), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    r = run_field(suite, bare, shas["field-direct"], head, "--python", sys.executable, machine="bare")
    assert r.returncode != 0
    failed = [line for line in r.stdout.splitlines() if line.startswith("FAILED")]
    assert failed and all("paths tried" in line and "benchmark/rl/" in line for line in failed), r.stdout[-3000:]
