"""Speed of the reference target, direct and manager-based side by side.

For each case and size: collector throughput of both runtimes (alternating
order, medians over repeats), the non-physics share of env_step, the replay +
bookkeeping share of the active window, MBA/direct ratios of throughput and of
update_state / reset_done, and the raw physics limit (the backend alone
stepping the same model, envs, substeps and threads).

    python scripts/reflab_speed.py --sizes 256,1024 --repeats 3 --out docs/log/speed.md
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reflab.bench import SEED_CASES, compose_case  # noqa: E402
from reflab.collector import collector_torch_threads, run_collector  # noqa: E402
from reflab.envs import make_env  # noqa: E402


def collector_run(case, runtime, n, warmup, measure):
    cfg = compose_case(case, n, [f"runtime={runtime}"], 0)
    env, s, _, _ = run_collector(cfg, warmup, measure, 8)
    m = {k: float(np.mean(v)) for k, v in s.ms.items()}
    active = m["env_step_ms"] + m["replay_ms"] + m["bookkeeping_ms"]
    m["steps_per_sec"] = n / (active / 1000)
    m["non_physics_share"] = 1 - m["physics_ms"] / m["env_step_ms"]
    m["replay_bookkeeping_share"] = (m["replay_ms"] + m["bookkeeping_ms"]) / active
    return m


def physics_limit(case, n, warmup, steps):
    """The backend alone, from the env's own reset states, with the collector's
    kind of actions: what the collector could reach if nothing but physics ran."""
    cfg = compose_case(case, n, [], 0)
    env = make_env(cfg)
    b, decimation = env.backend, int(cfg.task.decimation)
    rng = np.random.default_rng(0)
    ctrl = env.default_joint_pos + float(cfg.task.action_scale) * rng.uniform(-1, 1, (warmup + steps, n, env.action_dim))
    for k in range(warmup):
        b.step(ctrl[k], decimation)
    t0 = time.perf_counter()
    for k in range(steps):
        b.step(ctrl[warmup + k], decimation)
    dt = time.perf_counter() - t0
    env.close()
    return n * steps / dt


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="256,1024")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--measure", type=int, default=20)
    p.add_argument("--cases", default=",".join(SEED_CASES))
    p.add_argument("--out", default="docs/log/speed.md")
    a = p.parse_args()
    import torch  # noqa: PLC0415 -- heavy: --help and bad arguments answer without loading it

    torch.set_num_threads(collector_torch_threads())
    rows = []
    for n in [int(x) for x in a.sizes.split(",")]:
        for case in a.cases.split(","):
            runs = {"direct": [], "mba": []}
            limits = []
            for r in range(a.repeats):
                order = ("direct", "mba") if r % 2 == 0 else ("mba", "direct")
                for rt in order:
                    runs[rt].append(collector_run(case, rt, n, a.warmup, a.measure))
                limits.append(physics_limit(case, n, a.warmup, a.measure))
            med = {rt: {k: float(np.median([m[k] for m in ms])) for k in ms[0]} for rt, ms in runs.items()}
            ratio = float(np.median([m["steps_per_sec"] / d["steps_per_sec"] for d, m in zip(runs["direct"], runs["mba"])]))
            limit = float(np.median(limits))
            d, m = med["direct"], med["mba"]
            row = (case, n, d["steps_per_sec"], m["steps_per_sec"], ratio, limit, d["steps_per_sec"] / limit,
                   d["non_physics_share"], m["non_physics_share"], d["replay_bookkeeping_share"],
                   d["update_state_ms"], m["update_state_ms"], d["reset_done_ms"], m["reset_done_ms"],
                   d["reset_done_count"])
            rows.append(row)
            print(" | ".join(str(round(x, 3)) if isinstance(x, float) else str(x) for x in row), flush=True)
    head = ("| case | envs | direct steps/s | MBA steps/s | MBA/direct | physics limit steps/s | direct/limit "
            "| non-physics share of env_step (direct / MBA) | replay+bookkeeping share (direct) "
            "| update_state ms (direct / MBA) | reset_done ms (direct / MBA) | resets/step |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]:,.0f} | {r[3]:,.0f} | {r[4]:.3f} | {r[5]:,.0f} | {r[6]:.3f} "
                     f"| {r[7]:.1%} / {r[8]:.1%} | {r[9]:.1%} | {r[10]:.2f} / {r[11]:.2f} | {r[12]:.2f} / {r[13]:.2f} | {r[14]:.1f} |")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = "python scripts/reflab_speed.py " + " ".join(sys.argv[1:])
    text = (f"Command: `{cmd}`\n\nMachine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, "
            f"torch threads {collector_torch_threads()}; warmup {a.warmup}, measure {a.measure} steps, "
            f"{a.repeats} repeats per runtime (order alternated), medians.\n\n" + "\n".join(lines) + "\n")
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
