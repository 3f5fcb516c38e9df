"""Entry JSON documents of the field's schema with chosen per-run values, for
checking tables against hand-computed expectations."""
import json

PHASE_KEYS = ("env_step_ms", "replay_ms", "bookkeeping_ms")


def stats(values):
    n = len(values)
    mean = sum(values) / n
    return {"samples_ms": list(values), "mean_ms": mean, "median_ms": sorted(values)[n // 2],
            "std_ms": (sum((v - mean) ** 2 for v in values) / n) ** 0.5, "min_ms": min(values), "max_ms": max(values)}


def case_result(case, num_envs=100, measure=2, env_step=9.0, physics=6.0, step_core=6.5, update_state=1.5,
                reset_done=0.5, replay=0.6, bookkeeping=0.4, resets=1.0, obs_dim=48, decimation=4, runtime="direct"):
    algo, task, sim = case.split("/")
    total = (env_step + replay + bookkeeping) * measure
    return {
        "case": {"algo": algo, "task": task, "sim": sim, "variant": runtime, "runtime_sim_backend": sim,
                 "command": "x", "training_task_name": task, "num_envs": num_envs,
                 "replay_capacity_rows": num_envs * 4, "replay_capacity_steps": 4, "obs_dim": obs_dim,
                 "critic_dim": 0, "action_dim": 12, "env_steps_per_sync": 1,
                 "resolved_config": {"runtime": runtime, "task": {"decimation": decimation}}},
        "warmup_steps": 1, "measure_steps": measure, "total_active_ms": total,
        "collector_active_steps_per_sec": num_envs * measure / (total / 1000),
        "phase_ms_per_vector_step": {"env_step_ms": stats([env_step] * measure), "replay_ms": stats([replay] * measure),
                                     "bookkeeping_ms": stats([bookkeeping] * measure)},
        "phase_pct": {k: 0.0 for k in PHASE_KEYS},
        "env_step_timing_ms_per_vector_step": {
            "step_core_ms": stats([step_core] * measure), "update_state_ms": stats([update_state] * measure),
            "reset_done_ms": stats([reset_done] * measure), "reset_done_count": stats([resets] * measure)},
        "physics_ms_per_vector_step": None if physics is None else stats([physics] * measure),
        "env_step_overhead_ms_per_vector_step": None, "cpu_util_pct": 100.0, "notes": [],
    }


def doc(results, errors=(), num_envs=100, measure=2):
    return {"created_at": "2026-01-01T00:00:00", "benchmark": "offpolicy_collector_active", "definition": "d",
            "device": {}, "args": {"cases": "x", "backend": "mujoco", "num_envs": num_envs, "warmup_steps": 1,
                                   "measure_steps": measure, "replay_capacity_steps": 4},
            "results": list(results), "errors": list(errors)}


def write(path, document):
    """One run's file; its creation time is its own (identical content would be the same run)."""
    document = {**document, "created_at": f"2026-01-01T00:00:00 {path}"}
    path.write_text(json.dumps(document))
    return str(path)


def active_for_throughput(thr, num_envs=100):
    """Active ms per step giving this throughput."""
    return num_envs / thr * 1000.0
