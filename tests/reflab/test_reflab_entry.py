"""The benchmark entry: CLI, strict JSON/CSV, bad input, failing cases."""
import csv
import json
import subprocess
import sys

import jsonschema
import pytest

from reflab.bench import SEED_CASES

SMALL = ["--num-envs", "8", "--warmup-steps", "1", "--measure-steps", "3", "--replay-capacity-steps", "4"]


def run_entry(root, *args):
    return subprocess.run([sys.executable, "-m", "reflab.bench", *args], cwd=root,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def schema(root):
    return json.loads((root / "mbaphases" / "entry_schema.json").read_text())


def test_all_seven_cases_write_valid_json_and_csv(root, tmp_path, schema):
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    p = run_entry(root, "--cases", "default", "--all", *SMALL, "--out-json", str(out_json), "--out-csv", str(out_csv))
    assert p.returncode == 0, p.stderr
    text = out_json.read_text()
    assert "NaN" not in text
    doc = json.loads(text)
    jsonschema.validate(doc, schema)
    assert [f"{r['case']['algo']}/{r['case']['task']}/{r['case']['sim']}" for r in doc["results"]] == list(SEED_CASES)
    for r in doc["results"]:
        c = r["case"]
        assert c["num_envs"] == 8 and c["replay_capacity_rows"] == 32
        assert len(r["phase_ms_per_vector_step"]["env_step_ms"]["samples_ms"]) == 3
        total = sum(sum(r["phase_ms_per_vector_step"][k]["samples_ms"]) for k in ("env_step_ms", "replay_ms", "bookkeeping_ms"))
        assert r["total_active_ms"] == pytest.approx(total)
        assert r["collector_active_steps_per_sec"] == pytest.approx(8 * 3 / (total / 1000))
        assert len(c["config_hash"]) == 16 and c["resolved_config"]["algo"]["num_envs"] == 8
    assert doc["provenance"]["versions"]["mujoco-uni-runtime"]
    assert doc["provenance"]["torch_threads"] >= 1
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 7 and {"physics_ms", "np_env_update_state_ms", "env_step_pct"} <= set(rows[0])


def test_config_hash_is_stable_and_tracks_the_config(root, tmp_path):
    hashes = []
    for i, extra in enumerate([[], [], ["--override", "task.action_scale=0.5"]]):
        out = tmp_path / f"{i}.json"
        p = run_entry(root, "--cases", "sac/g1_walk_flat/mujoco", *SMALL, "--out-json", str(out), *extra)
        assert p.returncode == 0, p.stderr
        hashes.append(json.loads(out.read_text())["results"][0]["case"]["config_hash"])
    assert hashes[0] == hashes[1] != hashes[2]


@pytest.mark.parametrize("args, needle", [
    (["--cases", "sac/nope/mujoco"], "'sac/nope/mujoco'"),
    (["--backend", "bullet"], "'bullet'"),
    (["--num-envs", "0"], "--num-envs=0"),
    (["--measure-steps", "0"], "--measure-steps=0"),
    (["--cases", "auto", "--algos", "ppo"], "'ppo'"),
    (["--cases", "sac/g1_walk_flat/mujoco", "--override", "task.nope=1"], "task.nope=1"),
    (["--cases", "sac/g1_walk_flat/mujoco", "--override", "runtime=fast"], "'fast'"),
    (["--num-envs", "many"], "many"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(root, tmp_path, args, needle):
    out = tmp_path / "r.json"
    p = run_entry(root, *args, "--out-json", str(out))
    assert p.returncode == 2
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr
    assert not out.exists()


def test_case_crashing_mid_run_is_reported(root, tmp_path, schema):
    bad = ["--override", "task.default_joint_pos=[0.0]"]  # composes, then fails building the env
    out = tmp_path / "r.json"
    p = run_entry(root, "--cases", "sac/g1_walk_flat/mujoco,sac/g1_walk_flat/motrix", *SMALL, *bad, "--out-json", str(out))
    assert p.returncode == 1 and not out.exists()
    assert "sac/g1_walk_flat/mujoco" in p.stderr
    p = run_entry(root, "--cases", "sac/g1_walk_flat/mujoco,sac/g1_walk_flat/motrix", *SMALL, *bad,
                  "--out-json", str(out), "--continue-on-error")
    assert p.returncode == 1
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, schema)
    assert {e["case"] for e in doc["errors"]} | {f"{r['case']['algo']}/{r['case']['task']}/{r['case']['sim']}" for r in doc["results"]} == {
        "sac/g1_walk_flat/mujoco", "sac/g1_walk_flat/motrix"}
    assert doc["errors"], "a failed case must be listed"


def test_torch_threads_variable_is_validated(root, tmp_path):
    p = subprocess.run([sys.executable, "-m", "reflab.bench", "--cases", "sac/g1_walk_flat/mujoco", *SMALL,
                        "--out-json", str(tmp_path / "r.json")], cwd=root, capture_output=True, text=True,
                       env={**__import__("os").environ, "UNILAB_COLLECTOR_TORCH_THREADS": "lots"})
    assert p.returncode == 2 and "lots" in p.stderr
