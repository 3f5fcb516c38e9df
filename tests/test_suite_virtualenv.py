"""One real asv virtualenv build, through the field profile (asv.field.conf.json)
against a repository with the field's layout (the generated demo target)."""
import json
import sys

from asv import results as asv_results

from mbaphases.demo_repo import generate
from test_suite_asv import make_suite, run_mbaphases


def test_field_profile_builds_a_virtualenv_and_runs_both_sides(tmp_path):
    suite = make_suite(tmp_path, "mba-dev")
    shas = generate(tmp_path / "field-repo")
    p = run_mbaphases(suite, "run", "--profile", "tiny", "--runs", "1", "--machine", "venvbox",
                      "--field-repo", str(tmp_path / "field-repo"), timeout=2400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert str(tmp_path / "field-repo") in (suite / "asv.field.resolved.conf.json").read_text()
    for branch in ("main", "mba-dev"):
        (res,) = asv_results.iter_results_for_machine_and_hash(str(suite / "results"), "venvbox", shas[branch][:8])
        assert res.env_name.startswith("virtualenv-py")
        key = "collector.CollectorActive.track_throughput"
        samples = res.get_result_samples(key, res.get_result_params(key))
        assert all(s is not None and len(s) == 1 for s in samples)
        meta = json.loads((suite / "raw-runs" / "venvbox" / shas[branch] / "run1.meta.json").read_text())
        # the environment was read inside the built virtualenv, not this interpreter
        assert meta["environment"]["python_executable"] != sys.executable
        assert meta["environment"]["packages"]["mujoco-uni-runtime"]
        entry = json.loads((suite / "raw-runs" / "venvbox" / shas[branch] / "run1.json").read_text())
        assert {r["case"]["runtime"] for r in entry["results"]} == {"direct" if branch == "main" else "mba"}
