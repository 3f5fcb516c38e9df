"""The instrument's noise floor: run-to-run spread of the reference target's cases for a few
candidate profiles, measured side by side on this machine.

    python scripts/noise_study.py --runs 5 [--runtime direct] [--cases a,b] [--profiles base,nthread1]
    python scripts/noise_study.py --framework PYTHON --runs 5 [--cases a,b] [--profiles small,envs256]

With --framework, the framework's own release installed in PYTHON's environment is measured
through the suite's collector entry (mbaphases/unilab_entry.py) at the published pins' sizes.

Each round runs every profile once (one fresh entry process each, the order rotated every
round so no profile always runs first), so drift of the host falls on all profiles alike.
Per profile it reports:
* spread: the standard deviation of log throughput over runs, per case (median and max over
  cases): the per-run noise the gate's interval sees;
* the transient: per-step active time of the measured window's first third over its last
  third (median over runs and cases), > 1 when warmup did not reach a steady state;
* wall time per run (all cases), and the runs per side that fit into 10 minutes of machine
  time for a two-sided A/B;
* detectable change per 10 minutes: the half-width of a 90% interval of the ratio at that
  many runs a side, ~ 1.645 * spread * sqrt(2 / n) * 1.023 (the rank interval's efficiency
  against the mean's, sqrt(pi / 3)).
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbaphases.inputs import load_pins  # noqa: E402
from mbaphases.load import step_trend  # noqa: E402

BASE = {"num_envs": 64, "warmup_steps": 10, "measure_steps": 100, "torch_threads": 2, "overrides": []}
PROFILES = {
    "base": {},
    "nthread1": {"overrides": ["sim.nthread=1"]},
    "torch1": {"torch_threads": 1},
    "nthread1-torch1": {"overrides": ["sim.nthread=1"], "torch_threads": 1},
    "warmup50": {"warmup_steps": 50},
    "measure300": {"measure_steps": 300},
    "envs256": {"num_envs": 256},
    "nthread1-warmup50": {"overrides": ["sim.nthread=1"], "warmup_steps": 50},
}
# the framework through the suite's entry: the published pins' small profile and larger sizes
FRAMEWORK_BASE = {**load_pins(ROOT / "pins.unilab-release-line.toml")["profiles"]["small"], "overrides": []}
FRAMEWORK_PROFILES = {
    "small": {},
    "steps200": {"warmup_steps": 10, "measure_steps": 200},
    "envs256": {"num_envs": 256, "warmup_steps": 10, "measure_steps": 30},
    "envs256-steps100": {"num_envs": 256, "warmup_steps": 10, "measure_steps": 100},
}
ENTRY = ROOT / "mbaphases" / "unilab_entry.py"
CASES = ("flashsac/go2_joystick_flat/mujoco", "flashsac/g1_walk_flat/mujoco", "flashsac/g1_walk_flat/motrix",
         "sac/g1_walk_flat/mujoco", "sac/g1_walk_flat/motrix", "sac/g1_motion_tracking/mujoco",
         "sac/g1_motion_tracking/motrix")


def run_once(profile: dict, cases, runtime: str, out: Path, framework: str | None = None) -> tuple[float, dict]:
    sizes = ["--cases", ",".join(cases), "--num-envs", str(profile["num_envs"]), "--warmup-steps",
             str(profile["warmup_steps"]), "--measure-steps", str(profile["measure_steps"]), "--out-json", str(out)]
    if framework:
        cmd = [framework, str(ENTRY), *sizes, "--replay-capacity-steps", str(profile["replay_capacity_steps"])]
    else:
        cmd = [sys.executable, "-m", "reflab.bench", *sizes, "--replay-capacity-steps", "64",
               "--override", f"runtime={runtime}"]
    for o in profile["overrides"]:
        cmd += ["--override", o]
    env = {"UNILAB_COLLECTOR_TORCH_THREADS": str(profile["torch_threads"]), "OMP_WAIT_POLICY": "PASSIVE",
           "PATH": "/usr/bin:/bin"}
    t0 = time.time()
    p = subprocess.run(cmd, cwd=out.parent if framework else ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.time() - t0
    if p.returncode != 0:
        raise SystemExit(f"error: entry failed for {profile}: {p.stderr.strip().splitlines()[-1:]}")
    doc = json.loads(out.read_text())
    return wall, {f"{r['case']['algo']}/{r['case']['task']}/{r['case']['sim']}": r for r in doc["results"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--runtime", default="direct", choices=("direct", "mba"))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--profiles", default=None, help="default: every profile of the target")
    ap.add_argument("--framework", default=None, help="the python of an environment with a release of the framework")
    ap.add_argument("--out", default=None, help="also write the table (markdown) and the per-run data (JSON) here")
    args = ap.parse_args(argv)
    base, known = (FRAMEWORK_BASE, FRAMEWORK_PROFILES) if args.framework else (BASE, PROFILES)
    names = [x for x in (args.profiles or ",".join(known)).split(",") if x]
    unknown = [n for n in names if n not in known]
    if args.framework and not Path(args.framework).is_file():
        print(f"error: --framework {args.framework}: no such python", file=sys.stderr)
        return 2
    if unknown or args.runs < 2:
        print(f"error: unknown profile {unknown[0]!r}; valid: {', '.join(known)}" if unknown
              else f"error: --runs {args.runs} must be >= 2", file=sys.stderr)
        return 2
    cases = [c for c in args.cases.split(",") if c]
    profiles = {n: {**base, **known[n]} for n in names}
    data = {n: {"wall": [], "thr": {c: [] for c in cases}, "trend": {c: [] for c in cases}} for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in (order if r % 2 == 0 else order[::-1]):
                wall, results = run_once(profiles[n], cases, args.runtime, Path(tmp) / f"{n}-{r}.json", args.framework)
                data[n]["wall"].append(wall)
                for c in cases:
                    data[n]["thr"][c].append(results[c]["collector_active_steps_per_sec"])
                    data[n]["trend"][c].append(step_trend(results[c]))
                print(f"round {r + 1}/{args.runs} {n}: {wall:.1f} s", file=sys.stderr, flush=True)
    lines = ["| profile | spread (sd log thr), median over cases | max | first/last third | wall s per run "
             "| runs a side in 10 min | detectable change per 10 min (90%) | detectable at 3 runs a side |",
             "|---|---|---|---|---|---|---|---|"]
    for n in names:
        d = data[n]
        sds = [float(np.std(np.log(d["thr"][c]), ddof=1)) for c in cases]
        trend = float(np.median([t for c in cases for t in d["trend"][c] if t is not None]))
        wall = float(np.median(d["wall"]))
        per_side = max(2, int(600 // (2 * wall)))
        detect = 1.645 * float(np.median(sds)) * math.sqrt(2 / per_side) * math.sqrt(math.pi / 3)
        at3 = 1.645 * float(np.median(sds)) * math.sqrt(2 / 3) * math.sqrt(math.pi / 3)
        lines.append(f"| {n} | {np.median(sds):.1%} | {max(sds):.1%} | {trend:.3f} | {wall:.1f} | {per_side} "
                     f"| {detect:.1%} | {at3:.1%} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "noise-study.md").write_text(table + "\n")
        (out / "noise-study.json").write_text(json.dumps({"profiles": profiles, "data": data}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
