"""How long a full report takes: 7 cases x 2 sides x N runs of raw entry JSON
(made with the entry's own result builder) through loading, tables, gate and
files. Goal: under 2 s for 10 runs per side.

    python scripts/report_speed.py --runs 10 --repeats 5
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mbaphases import analysis, load, outputs  # noqa: E402
from reflab.bench import SEED_CASES  # noqa: E402
from reflab.collector import timing_stats  # noqa: E402


def entry_doc(rng, scale, measure=100, num_envs=256):
    results = []
    for case in SEED_CASES:
        algo, task, sim = case.split("/")
        ms = {k: rng.normal(v * scale, v * 0.03, measure).clip(0.001) for k, v in (
            ("env_step_ms", 30.0), ("replay_ms", 0.5), ("bookkeeping_ms", 0.05), ("physics_ms", 27.0),
            ("step_core_ms", 27.5), ("update_state_ms", 1.5), ("reset_done_ms", 0.4), ("reset_done_count", 2.0))}
        total = float(sum(ms[k].sum() for k in ("env_step_ms", "replay_ms", "bookkeeping_ms")))
        results.append({
            "case": {"algo": algo, "task": task, "sim": sim, "variant": "x", "runtime_sim_backend": sim, "command": "",
                     "training_task_name": task, "num_envs": num_envs, "replay_capacity_rows": num_envs * 64,
                     "replay_capacity_steps": 64, "obs_dim": 99, "critic_dim": 0, "action_dim": 29, "env_steps_per_sync": 1},
            "warmup_steps": 10, "measure_steps": measure, "total_active_ms": total,
            "collector_active_steps_per_sec": num_envs * measure / (total / 1000),
            "phase_ms_per_vector_step": {k: timing_stats(ms[k]) for k in ("env_step_ms", "replay_ms", "bookkeeping_ms")},
            "phase_pct": {}, "env_step_timing_ms_per_vector_step": {
                k: timing_stats(ms[k]) for k in ("step_core_ms", "update_state_ms", "reset_done_ms", "reset_done_count")},
            "physics_ms_per_vector_step": timing_stats(ms["physics_ms"]), "env_step_overhead_ms_per_vector_step": None,
            "cpu_util_pct": 100.0, "notes": []})
    return {"created_at": "", "benchmark": "offpolicy_collector_active", "definition": "", "device": {},
            "args": {"cases": "default", "backend": "mujoco", "num_envs": num_envs, "warmup_steps": 10,
                     "measure_steps": measure, "replay_capacity_steps": 64}, "results": results, "errors": []}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for side, scale in (("b", 1.0), ("c", 1.1)):
            for k in range(a.runs):
                (tmp / f"{side}_run{k + 1}.json").write_text(json.dumps(entry_doc(rng, scale)))
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            b = load.load_raw_side("baseline", [str(tmp / "b_run*.json")])
            c = load.load_raw_side("candidate", [str(tmp / "c_run*.json")])
            rep = analysis.build(b, c)
            outputs.write(rep, tmp / "out")
            times.append(time.perf_counter() - t0)
    print(f"7 cases x 2 sides x {a.runs} runs (100 steps each): report written in median "
          f"{statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}) over {a.repeats} repeats")


if __name__ == "__main__":
    main()
