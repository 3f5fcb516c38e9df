"""One real asv virtualenv build, through the field profile (asv.field.conf.json)
against a repository with the field's layout (the generated demo target)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from asv import results as asv_results
from test_suite_asv import make_suite, run_mbaphases, summary_of, with_cases
from test_suite_sides import CASES

from mbaphases.demo_repo import generate

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow(seconds=200)  # real asv runs, installs or physics over many runs: minutes


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


def test_asv_typed_as_docs_asv_md_types_it_takes_the_pinned_independent_runs(tmp_path):
    """docs/asv.md's commands as written (at the tiny profile): `asv continuous main mba-dev` as the asv
    docs type it (plus --machine) gives each side the pinned number of interleaved runs, each a fresh
    entry process, stored as samples (the benchmark type in asv-plugin/ declares rounds); `asv run
    HASHFILE` adds as many; asv compares and publishes; the report has every run for the gate."""
    suite = make_suite(tmp_path, "mba-dev")
    pins = (suite / "pins.toml").read_text()
    pins = with_cases(pins, CASES)
    pins = re.sub(r"^runs = \d+", "runs = 3", pins, flags=re.M)
    (suite / "pins.toml").write_text(pins)
    shas = generate(suite / "demo-target")
    commands = re.search(r"```\n(M=.*?)```", (ROOT / "docs" / "asv.md").read_text(), re.S).group(1)
    env = {**os.environ, "MBAPHASES_PROFILE": "tiny", "MBAPHASES_LOCK": str(suite / "formal.lock"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    # as typed into a terminal: each line runs whatever the one before exited with (asv continuous
    # exits 1 where its own comparison sees a decrease, as it may here: MBA dev is slower)
    p = subprocess.run(["bash", "-u", "-c", commands], cwd=suite, env=env,
                       capture_output=True, text=True, timeout=2400)
    # the last line is the report, whose exit is its verdict; each line before it is checked by what it left
    assert (suite / "reports" / "demo" / "summary.json").is_file(), p.stdout[-3000:] + p.stderr[-3000:]
    assert "command not found" not in p.stderr and "fatal:" not in p.stderr, p.stderr[-3000:]
    # asv compare's table (asv continuous prints one too where its own comparison saw a change)
    assert "entry_time_per_million_steps" in p.stdout.rsplit("Benchmark (Parameter)", 1)[-1], p.stdout[-3000:]
    s = summary_of(p, suite / "reports" / "demo")
    assert "round 3/3" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    (machine,) = [d.name for d in (suite / "results").iterdir() if d.is_dir()]  # the one the docs' $M names
    assert (suite / "html" / "index.html").is_file() and (suite / "html" / "mbaphases" / "index.html").is_file()
    for branch in ("main", "mba-dev"):
        (res,) = asv_results.iter_results_for_machine_and_hash(str(suite / "results"), machine, shas[branch][:8])
        assert res.get_result_value("collector.CollectorActive.entry_time_per_million_steps",
                                    res.get_result_params("collector.CollectorActive.entry_time_per_million_steps"))
        metas = sorted((suite / "raw-runs" / machine / shas[branch]).glob("run*.meta.json"))
        assert len(metas) == 6  # three of asv continuous, three of asv run HASHFILE
        assert all(json.loads(m.read_text())["lock"]["alone"] for m in metas)
    assert "MISSING" not in s["counts"] and all(
        c["throughput"]["baseline"]["runs"] == c["throughput"]["candidate"]["runs"] == 6 for c in s["cases"]), s
