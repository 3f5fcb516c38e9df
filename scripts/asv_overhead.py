"""Does wrapping the entry in asv change what it measures? Paired and
interleaved: each pair runs one case once through the entry directly and once
through `asv run` (existing environment, one round), in alternating order, and
compares the collector throughput of the two.

    python scripts/asv_overhead.py --case sac/g1_walk_flat/mujoco --pairs 5
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbaphases.demo_repo import generate  # noqa: E402
from mbaphases.inputs import load_active_pins, load_asv_conf  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", default="sac/g1_walk_flat/mujoco")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--profile", default="demo")
    a = p.parse_args()
    prof = load_active_pins(ROOT / "pins.toml", a.profile)["active_profile"]
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp)
        shutil.copytree(ROOT / "benchmarks", suite / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
        pins = (ROOT / "pins.toml").read_text()
        start = pins.index("cases = [")
        pins = pins[:start] + f'cases = ["{a.case}"]' + pins[pins.index("]", start) + 1:]
        (suite / "pins.toml").write_text(pins)
        sha = generate(suite / "demo-target")["main"]
        conf = load_asv_conf(ROOT / "asv.conf.json")
        (suite / "asv.conf.json").write_text(json.dumps({**conf, "branches": [sha]}))
        subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--machine", "overhead"], cwd=suite,
                       check=True, capture_output=True)
        env = {**os.environ, "MBAPHASES_PROFILE": a.profile, "MBAPHASES_MACHINE": "overhead",
               "MBAPHASES_TARGET_DIR": str(suite / "demo-target"), "MBAPHASES_COMMIT": sha,
               "UNILAB_COLLECTOR_TORCH_THREADS": str(prof["torch_threads"])}
        entry = suite / "demo-target" / "scripts/benchmark/rl/benchmark_offpolicy_collector_active.py"
        direct, wrapped = [], []

        def run_direct(k):
            out = suite / f"direct{k}.json"
            subprocess.run([sys.executable, str(entry), "--cases", a.case, "--num-envs", str(prof["num_envs"]),
                            "--warmup-steps", str(prof["warmup_steps"]), "--measure-steps", str(prof["measure_steps"]),
                            "--replay-capacity-steps", str(prof["replay_capacity_steps"]), "--out-json", str(out)],
                           cwd=suite / "demo-target", env=env, check=True, capture_output=True)
            direct.append(json.loads(out.read_text())["results"][0]["collector_active_steps_per_sec"])

        def run_asv(k):
            subprocess.run([sys.executable, "-m", "asv", "run", "-E", f"existing:{sys.executable}", "--set-commit-hash",
                            sha, "-a", "rounds=1", "--machine", "overhead", "-b", "entry_time_per_million_steps"],
                           cwd=suite, env=env, check=True, capture_output=True)
            raw = sorted((suite / "raw-runs" / "overhead" / sha).glob("run*.json"), key=lambda f: f.stat().st_mtime)
            doc = json.loads([f for f in raw if not f.name.endswith(".meta.json")][-1].read_text())
            wrapped.append(doc["results"][0]["collector_active_steps_per_sec"])

        for k in range(a.pairs):
            for fn in ((run_direct, run_asv) if k % 2 == 0 else (run_asv, run_direct)):
                fn(k)
        ratios = [w / d for w, d in zip(wrapped, direct)]
        print(f"case {a.case}, profile {a.profile} ({prof['num_envs']} envs, {prof['measure_steps']} steps), {a.pairs} pairs")
        print(f"direct entry  steps/s: median {statistics.median(direct):,.0f}  runs {[round(x) for x in direct]}")
        print(f"through asv   steps/s: median {statistics.median(wrapped):,.0f}  runs {[round(x) for x in wrapped]}")
        print(f"asv / direct per pair: median {statistics.median(ratios):.3f}  [{min(ratios):.3f}, {max(ratios):.3f}]")


if __name__ == "__main__":
    main()
