"""Whether taking turns moves a ratio: two refs of a target's history, some cases, run alone (each
side in turn on its slot) and in pairs taking turns on the same slot at several turn lengths; the
ratio candidate / baseline of each period, per design and case. A design whose ratio differs from the
solo one by more than their spreads explain biases the gate.

    python scripts/turn_bias.py --repo demo-target --baseline main --candidate mba-dev \
        --case sac/g1_walk_flat/motrix --rounds 3 --turns 25,100,400
    python scripts/turn_bias.py --repo demo-target --baseline main --candidate mba-next --cpus 2 \
        --cases all --rounds 6 --turns 25 --json turn-bias.json

--cpus 1 (default): each CPU its own slot, every pool at one thread, both slots at once. --cpus N:
one slot of CPUs 0..N-1, every pool at N threads (the demo profile's program at 2). Solo and turns
alternate period by period, so the host's drift falls on both. --json: per case, each design's
ratio and its difference from solo (log scale) with its standard error and a 90% t interval over the
rounds (solo and turns of one round paired), and each turn length's predicted bias with its
standard error (random effects over the cases, mbaphases.turn_bias.correction_from): the data behind
mbaphases/turn_bias.toml. The two refs are checked
out into a temporary folder, removed at the end. Writes a Markdown table to stdout. Bad input:
one error line, exit 2."""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from scipy import stats

from mbaphases import turn_bias
from mbaphases.errors import ScriptParser

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "scripts/benchmark/rl/benchmark_offpolicy_collector_active.py"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "UNILAB_COLLECTOR_TORCH_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}




DEMO_CASES = ["flashsac/go2_joystick_flat/mujoco", "flashsac/g1_walk_flat/mujoco", "flashsac/g1_walk_flat/motrix",
              "sac/g1_walk_flat/mujoco", "sac/g1_walk_flat/motrix", "sac/g1_motion_tracking/mujoco",
              "sac/g1_motion_tracking/motrix"]


def threads_env(n: int) -> dict:
    """Every pool at ``n`` threads, as the suite's runs have them (benchmarks/_target.side_env): the
    OpenMP threads wait passively only on one CPU (the demo profile asks for 2, so fewer than it
    asks); on the CPUs the profile asks for, the default wait, as the pinned program runs."""
    pools = {k: str(n) for k in ONE_THREAD if k != "OMP_WAIT_POLICY"}
    return {**pools, "OMP_WAIT_POLICY": "PASSIVE"} if n == 1 else pools


def entry(checkout: Path, cpus: str, case: str, steps: int, out: Path) -> list[str]:
    return ["taskset", "-c", cpus, sys.executable, str(checkout / ENTRY), "--cases", case, "--num-envs", "64",
            "--warmup-steps", "10", "--measure-steps", str(steps), "--replay-capacity-steps", "64",
            "--out-json", str(out), "--override", "sim.nthread=1"]


def throughput(path: Path) -> float | None:
    """The case's throughput, or None where the entry failed (no result: reported as a failed slot)."""
    try:
        return float(json.loads(path.read_text())["results"][0]["collector_active_steps_per_sec"])
    except (OSError, ValueError, KeyError, IndexError):
        return None


def slot(checkouts: dict, design, r: int, case: str, steps: int, tmp: Path, width: int) -> list[tuple[float, float]]:
    """One slot of a design: (baseline, candidate) throughput per slot. ``width`` 1: a slot per CPU,
    both at once; N: one slot of CPUs 0..N-1. Alone, a slot runs its two sides one after the
    other; in turns, both at once. Which side goes first alternates between slots and rounds."""
    slots = [(0, "0"), (1, "1")] if width == 1 else [(0, ",".join(str(c) for c in range(width)))]
    outs: dict[int, dict[str, Path]] = {}

    def on(index: int, cpus: str) -> None:
        order = ("baseline", "candidate") if (r + index) % 2 == 0 else ("candidate", "baseline")
        outs[index] = {side: tmp / f"{design}-{case.replace('/', '_')}-{r}-{index}-{side}.json" for side in order}
        cmds = []
        for role, side in enumerate(order):
            env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"} | threads_env(width)
            if design != "solo":
                pair = tmp / f"turns-{design}-{case.replace('/', '_')}-{r}-{index}"
                pair.mkdir(exist_ok=True)
                env.update(MBAPHASES_TURNS_MODULE=str(ROOT / "mbaphases" / "turns.py"), MBAPHASES_TURNS_DIR=str(pair),
                           MBAPHASES_TURNS_ROLE=str(role), MBAPHASES_TURN_MS=str(design))
            cmds.append((entry(checkouts[side], cpus, case, steps, outs[index][side]), checkouts[side], env))
        if design == "solo":
            for cmd, cwd, env in cmds:
                subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=False)
        else:
            procs = [subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for cmd, cwd, env in cmds]
            for p in procs:
                p.wait()

    threads = [threading.Thread(target=on, args=s_) for s_ in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [(throughput(outs[i]["baseline"]), throughput(outs[i]["candidate"])) for i, _ in slots]


def difference(solo: list, turns: list) -> dict:
    """The turns ratio against the solo one (log scale), the rounds' slots paired in order: mean and
    a 90% t interval (the rounds' spread), or the means alone where fewer than two pairs survive."""
    pairs = [(math.log(tc / tb), math.log(sc / sb)) for (tb, tc), (sb, sc) in zip(turns, solo) if tb and tc and sb and sc]
    diffs = [t - s_ for t, s_ in pairs]
    out = {"pairs": len(diffs), "log_difference": statistics.mean(diffs) if diffs else None}
    if len(diffs) >= 2:
        se = statistics.stdev(diffs) / math.sqrt(len(diffs))
        half = t_quantile(len(diffs) - 1) * se
        out.update(se=se, lower=out["log_difference"] - half, upper=out["log_difference"] + half)
    return out


def t_quantile(df: int) -> float:
    return float(stats.t.ppf(0.95, df))


def parse(argv) -> argparse.Namespace:
    """The arguments, checked: one error line and exit 2 for a bad one (``cases`` and ``turn_list``
    added)."""
    p = ScriptParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", required=True, help="the target's git repository (e.g. demo-target)")
    p.add_argument("--baseline", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--case", help="one case (or --cases)")
    p.add_argument("--cases", help="comma list of cases, or 'all' for the demo's 7")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=200, help="measured steps (default 200)")
    p.add_argument("--turns", default="25,100,400", help="turn lengths in ms, comma list")
    p.add_argument("--cpus", type=int, default=1, help="CPUs a slot has (1: one slot per CPU; N: one slot of N)")
    p.add_argument("--json", help="write the per-case differences here")
    args = p.parse_args(argv)
    args.cases = DEMO_CASES if args.cases == "all" else [c for c in (args.cases or args.case or "").split(",") if c]
    if not args.cases:
        p.error("--case or --cases is required (a case, a comma list, or 'all')")
    if args.rounds < 2 or args.steps < 1:
        p.error(f"--rounds {args.rounds} must be >= 2 and --steps {args.steps} >= 1")
    try:
        args.turn_list = [float(x) for x in args.turns.split(",")]
    except ValueError:
        args.turn_list = []
    if not args.turn_list or not all(0 < t < 10_000 for t in args.turn_list):
        p.error(f"--turns {args.turns!r}: a comma list of turn lengths in ms, each in (0, 10000)")
    have = len(os.sched_getaffinity(0))
    if args.cpus < 1 or have < max(2, args.cpus):
        p.error(f"--cpus {args.cpus}: valid is 1 (two one-CPU slots) up to this machine's {have} CPUs, "
                "and the script needs at least 2")
    for ref in (args.baseline, args.candidate):
        if subprocess.run(["git", "-C", args.repo, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}"],
                          capture_output=True, check=False).returncode != 0:
            p.error(f"--repo {args.repo}: no commit {ref!r} there")
    return args


def measure(args) -> dict[tuple, list]:
    """(case, design) -> each slot's (baseline, candidate) throughput, the refs checked out into a
    temporary folder removed at the end."""
    repo = Path(args.repo)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        checkouts = {side: tmp / side for side in ("baseline", "candidate")}
        for side, ref in (("baseline", args.baseline), ("candidate", args.candidate)):
            subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(checkouts[side]), ref],
                           check=True, capture_output=True)
        try:
            pairs: dict[tuple, list] = {}
            for r in range(args.rounds):
                for case in args.cases:
                    for design in ["solo", *[f"{t:g}" for t in args.turn_list]]:
                        pairs.setdefault((case, design), []).extend(
                            slot(checkouts, design, r, case, args.steps, tmp, args.cpus))
            return pairs
        finally:
            for path in checkouts.values():
                subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(path)],
                               capture_output=True, check=False)


def table(args, pairs: dict[tuple, list]) -> list[dict]:
    """Prints the Markdown table; returns each turn design's difference from solo, per case."""
    print(f"| case | design ({args.steps} steps, slots of {args.cpus} CPU{'s' if args.cpus > 1 else ''}) | "
          f"ratio {args.candidate} / {args.baseline} | sd of the slots' log ratio | slots | failed slots | "
          "turns - solo (log) [90%] |")
    print("|---|---|---|---|---|---|---|")
    summary = []
    for (case, design), slots in pairs.items():
        values = [(b, c) for b, c in slots if b and c]
        logs = [math.log(c / b) for b, c in values]
        name = "alone, in turn" if design == "solo" else f"turns of {design} ms"
        diff = difference(pairs[(case, "solo")], slots) if design != "solo" else {}
        if diff:
            summary.append({"case": case, "turn_ms": float(design), **diff})
        span = (f"{diff['log_difference']:+.4f} [{diff['lower']:+.4f}, {diff['upper']:+.4f}]" if "lower" in diff else "")
        cells = ([f"{math.exp(statistics.mean(logs)):.3f}", f"{statistics.stdev(logs):.3f}" if len(logs) > 1 else "n/a",
                  len(values), len(slots) - len(values), span] if values else ["n/a", "n/a", 0, len(slots), ""])
        print(f"| {case} | {name} | " + " | ".join(str(x) for x in cells) + " |")
    return summary


def main(argv=None) -> int:
    args = parse(argv)
    summary = table(args, measure(args))
    # the commits, so that a gate knows the sides a study measured (mbaphases.turn_bias)
    sha = {ref: subprocess.run(["git", "-C", args.repo, "rev-parse", f"{ref}^{{commit}}"], capture_output=True,
                               text=True, check=True).stdout.strip() for ref in (args.baseline, args.candidate)}
    study = {"command": "python scripts/turn_bias.py " + " ".join(argv if argv is not None else sys.argv[1:]),
             "baseline": args.baseline, "candidate": args.candidate, "baseline_sha": sha[args.baseline],
             "candidate_sha": sha[args.candidate], "cpus": args.cpus, "rounds": args.rounds,
             "steps": args.steps, "differences": summary}
    corrections = turn_bias.summary_of(study)
    print()
    for c in corrections:
        print(f"turns of {c['turn_ms']:g} ms: bias {c['bias']:+.4f} (se of the mean {c['mean_se']:.4f}, between cases "
              f"{c['between_sd']:.4f}): predicted for a case {c['bias']:+.4f}, se {c['se']:.4f} on {c['df']} df "
              "(this study alone; mbaphases/turn_bias.toml combines the studies of a class)")
    if args.json:
        Path(args.json).write_text(json.dumps({**study, "corrections": corrections}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
