"""The demo history's known answers, measured side by side in one process.

For every seed case, the demo commits' runtimes (main: direct; mba-dev: the
manager-based runtime with the three costs of reflab/manager/dev_costs.py;
each opt/ commit: one cost removed; mba-next: none) run in rotating order for
several rounds at one size. Prints per variant the median throughput ratio to
main and the median of each phase, and the change each optimization makes to
physics, update_state and reset_done against mba-dev, with the within-variant
run-to-run range.

    python scripts/demo_costs.py --num-envs 64 --rounds 3 --override sim.nthread=1

docs/log/demo-costs.md is measured at the demo profile's CPUs, as a side of a pair in turns runs (two
CPUs, every pool at the profile's two threads):

    env OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 NUMBA_NUM_THREADS=2 \
        UNILAB_COLLECTOR_TORCH_THREADS=2 taskset -c 0,1 \
        python scripts/demo_costs.py --num-envs 64 --rounds 3 --override sim.nthread=1 --out docs/log/demo-costs.md

docs/log/demo-costs-one-cpu.md at a one-CPU side's settings (every pool at one thread, ``taskset -c 1``).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mbaphases.demo_repo import HISTORY  # noqa: E402
from reflab.bench import SEED_CASES, UsageError, available_cases, compose_case  # noqa: E402
from reflab.collector import collector_torch_threads, run_collector  # noqa: E402
from reflab.manager import dev_costs  # noqa: E402

PHASES = ("physics_ms", "update_state_ms", "reset_done_ms")


def one_run(case, commit, n, warmup, measure, overrides):
    for name in dev_costs.__dict__:
        if name.isupper():
            setattr(dev_costs, name, name in commit.costs)
    cfg = compose_case(case, n, [f"runtime={commit.runtime}", *overrides], 0)
    _, s, _, _ = run_collector(cfg, warmup, measure, 8)
    m = {k: float(np.mean(v)) for k, v in s.ms.items()}
    m["active_ms"] = m["env_step_ms"] + m["replay_ms"] + m["bookkeeping_ms"]
    m["throughput"] = n / (m["active_ms"] / 1000)
    return m


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--measure", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cases", default=",".join(SEED_CASES))
    p.add_argument("--override", action="append", default=[],
                   help="a Hydra override for every case, repeatable (the demo profile's: sim.nthread=1)")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    cases = a.cases.split(",")
    unknown = [c for c in cases if c not in available_cases()]
    if unknown:
        print(f"error: --cases {unknown[0]!r} is not a case; valid: {', '.join(available_cases())}", file=sys.stderr)
        return 2
    for case in cases:  # every case and override composes before anything is measured
        try:
            compose_case(case, a.num_envs, ["runtime=direct", *a.override], 0)
        except UsageError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch  # noqa: PLC0415 -- after OMP_WAIT_POLICY: torch reads it when it loads

    torch.set_num_threads(collector_torch_threads())
    commits = list(HISTORY)
    lines = [f"# Demo history: measured phase changes ({a.num_envs} envs, {a.rounds} rounds, {platform.node()})", "",
             "Command: `python scripts/demo_costs.py " + " ".join(
                 [f"--num-envs {a.num_envs}", f"--rounds {a.rounds}", *(f"--override {o}" for o in a.override)])
             + f"` (collector torch threads: {collector_torch_threads()})", ""]
    for case in cases:
        runs = {c.name: [] for c in commits}
        for r in range(a.rounds):
            order = commits[r % len(commits):] + commits[:r % len(commits)]
            for c in (order if r % 2 == 0 else order[::-1]):
                runs[c.name].append(one_run(case, c, a.num_envs, a.warmup, a.measure, a.override))
        med = {c: {k: float(np.median([m[k] for m in v])) for k in v[0]} for c, v in runs.items()}
        rng = {c: {k: float(np.ptp([m[k] for m in v])) for k in v[0]} for c, v in runs.items()}
        lines += [f"## {case}", "", "| commit | thr / main | physics ms | update_state ms | reset_done ms | active ms |",
                  "|---|---|---|---|---|---|"]
        for c in commits:
            m, d = med[c.name], rng[c.name]
            lines.append(f"| {c.name} | {m['throughput'] / med['main']['throughput']:.3f} | "
                         + " | ".join(f"{m[k]:.3f} ±{d[k] / 2:.3f}" for k in (*PHASES, "active_ms")) + " |")
        lines += ["", "| optimization vs mba-dev | Δ physics | Δ update_state | Δ reset_done | Δ active | own share |",
                  "|---|---|---|---|---|---|"]
        for c in commits:
            if not c.name.startswith("opt/"):
                continue
            delta = {k: med[c.name][k] - med["mba-dev"][k] for k in (*PHASES, "active_ms")}
            own = {"opt/mujoco-dispatch": "physics_ms", "opt/update-state": "update_state_ms",
                   "opt/reset": "reset_done_ms"}[c.name]
            share = delta[own] / delta["active_ms"] if delta["active_ms"] else float("nan")
            lines.append(f"| {c.name} | " + " | ".join(f"{delta[k]:+.3f}" for k in (*PHASES, "active_ms"))
                         + f" | {share:.0%} |")
        lines.append("")
        print("\n".join(lines[-(len(commits) + 9):]), flush=True)
    if a.out:
        Path(a.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
