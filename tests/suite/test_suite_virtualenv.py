"""One real asv virtualenv build, through the field profile (asv.field.conf.json)
against a repository with the field's layout (the generated demo target)."""
import json
import os
import re
import subprocess
import sys

import pytest
from asv import results as asv_results
from test_suite_asv import make_suite, run_mbaphases, summary_of, with_cases
from test_suite_sides import CASES

from mbaphases.demo_repo import generate

pytestmark = pytest.mark.slow(seconds=115)  # real asv runs, installs or physics over many runs: minutes


def test_field_profile_builds_a_virtualenv_and_runs_both_sides(tmp_path):
    suite = make_suite(tmp_path, "mba-dev")
    shas = generate(tmp_path / "field-repo")
    p = run_mbaphases(suite, "run", "--profile", "tiny", "--runs", "1", "--machine", "venvbox",
                      "--field-repo", str(tmp_path / "field-repo"), timeout=2400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    # the field's repository under the suite's pins.toml: a config and results folder of its own
    assert str(tmp_path / "field-repo") in (suite / "asv.field-pins.resolved.conf.json").read_text()
    assert not (suite / "results" / "venvbox").exists()
    for branch in ("main", "mba-dev"):
        (res,) = asv_results.iter_results_for_machine_and_hash(str(suite / "results-field-pins"), "venvbox",
                                                              shas[branch][:8])
        assert res.env_name.startswith("virtualenv-py")
        key = "collector.CollectorActive.entry_time_per_million_steps"
        samples = res.get_result_samples(key, res.get_result_params(key))
        assert all(s is not None and len(s) == 1 for s in samples)
        meta = json.loads((suite / "raw-runs" / "venvbox" / shas[branch] / "run1.meta.json").read_text())
        # the environment was read inside the built virtualenv, not this interpreter
        assert meta["environment"]["python_executable"] != sys.executable
        assert meta["environment"]["packages"]["mujoco-uni-runtime"]
        entry = json.loads((suite / "raw-runs" / "venvbox" / shas[branch] / "run1.json").read_text())
        assert {r["case"]["runtime"] for r in entry["results"]} == {"direct" if branch == "main" else "mba"}


def test_plain_asv_continuous_takes_the_pinned_independent_runs(tmp_path):
    """`asv continuous main mba-dev` as the asv docs type it (plus --machine): the
    benchmark type in asv-plugin/ declares rounds, so each side gets the pinned number
    of interleaved runs, each a fresh entry process, stored as samples; the report
    then has enough runs for the gate."""

    suite = make_suite(tmp_path, "mba-dev")
    pins = (suite / "pins.toml").read_text()
    pins = with_cases(pins, CASES)
    pins = re.sub(r"^runs = \d+", "runs = 3", pins, flags=re.M)
    (suite / "pins.toml").write_text(pins)
    shas = generate(suite / "demo-target")
    env = {**os.environ, "MBAPHASES_PROFILE": "tiny", "MBAPHASES_LOCK": str(suite / "formal.lock")}
    asv = [sys.executable, "-m", "asv"]
    subprocess.run([*asv, "machine", "--yes", "--machine", "plainbox"], cwd=suite, env=env, check=True,
                   capture_output=True)
    p = subprocess.run([*asv, "continuous", "main", "mba-dev", "--machine", "plainbox"], cwd=suite, env=env,
                       capture_output=True, text=True, timeout=2400)
    assert "round 3/3" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    for branch in ("main", "mba-dev"):
        (res,) = asv_results.iter_results_for_machine_and_hash(str(suite / "results"), "plainbox", shas[branch][:8])
        key = "collector.CollectorActive.entry_time_per_million_steps"
        samples = res.get_result_samples(key, res.get_result_params(key))
        assert [len(s) for s in samples] == [3, 3], samples
        metas = sorted((suite / "raw-runs" / "plainbox" / shas[branch]).glob("run*.meta.json"))
        assert len(metas) == 3
        assert all(json.loads(m.read_text())["lock"]["alone"] for m in metas)
    r = run_mbaphases(suite, "report", "--out", str(tmp_path / "rep"), "--machine", "plainbox")
    s = summary_of(r, tmp_path / "rep")
    assert "MISSING" not in s["counts"], r.stdout[-2000:] + r.stderr
