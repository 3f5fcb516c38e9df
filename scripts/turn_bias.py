"""Whether taking turns on one CPU moves a ratio: two refs of a target's history, one case, run
alone (each side in turn on its CPU) and in pairs on one CPU at several turn lengths, both CPUs
at once; the ratio candidate / baseline of each slot, per design. A design whose ratio differs
from the solo one by more than their spreads explain biases the gate.

    python scripts/turn_bias.py --repo demo-target --baseline main --candidate mba-dev \
        --case sac/g1_walk_flat/motrix --rounds 3 --turns 25,100,400

Every pool at one thread and each entry pinned to its CPU in every design, so only the sharing
differs. The two refs are checked out into a temporary folder, removed at the end. Writes a
Markdown table to stdout. Bad input: one error line, exit 2."""
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

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "scripts/benchmark/rl/benchmark_offpolicy_collector_active.py"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "UNILAB_COLLECTOR_TORCH_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2: the suite's contract for bad input
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def entry(checkout: Path, cpu: int, case: str, steps: int, out: Path) -> list[str]:
    return ["taskset", "-c", str(cpu), sys.executable, str(checkout / ENTRY), "--cases", case, "--num-envs", "64",
            "--warmup-steps", "10", "--measure-steps", str(steps), "--replay-capacity-steps", "64",
            "--out-json", str(out), "--override", "sim.nthread=1"]


def throughput(path: Path) -> float | None:
    """The case's throughput, or None where the entry failed (no result: reported as a failed slot)."""
    try:
        return float(json.loads(path.read_text())["results"][0]["collector_active_steps_per_sec"])
    except (OSError, ValueError, KeyError, IndexError):
        return None


def slot(checkouts: dict, design, r: int, case: str, steps: int, tmp: Path) -> list[tuple[float, float]]:
    """One slot of a design on both CPUs at once: (baseline, candidate) throughput per CPU. Alone,
    each CPU runs its two sides one after the other; in turns, both at once. Which side goes first
    alternates between CPUs and rounds."""
    outs: dict[int, dict[str, Path]] = {}

    def on(cpu: int) -> None:
        order = ("baseline", "candidate") if (r + cpu) % 2 == 0 else ("candidate", "baseline")
        outs[cpu] = {side: tmp / f"{design}-{r}-{cpu}-{side}.json" for side in order}
        cmds = []
        for role, side in enumerate(order):
            env = {**os.environ, **ONE_THREAD}
            if design != "solo":
                pair = tmp / f"turns-{design}-{r}-{cpu}"
                pair.mkdir(exist_ok=True)
                env.update(MBAPHASES_TURNS_MODULE=str(ROOT / "mbaphases" / "turns.py"), MBAPHASES_TURNS_DIR=str(pair),
                           MBAPHASES_TURNS_ROLE=str(role), MBAPHASES_TURN_MS=str(design))
            cmds.append((entry(checkouts[side], cpu, case, steps, outs[cpu][side]), checkouts[side], env))
        if design == "solo":
            for cmd, cwd, env in cmds:
                subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=False)
        else:
            procs = [subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for cmd, cwd, env in cmds]
            for p in procs:
                p.wait()

    threads = [threading.Thread(target=on, args=(cpu,)) for cpu in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [(throughput(outs[cpu]["baseline"]), throughput(outs[cpu]["candidate"])) for cpu in (0, 1)]


def main(argv=None) -> int:
    p = _Parser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", required=True, help="the target's git repository (e.g. demo-target)")
    p.add_argument("--baseline", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--case", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=200, help="measured steps (default 200)")
    p.add_argument("--turns", default="25,100,400", help="turn lengths in ms, comma list")
    args = p.parse_args(argv)
    repo = Path(args.repo)
    if args.rounds < 2 or args.steps < 1:
        print(f"error: --rounds {args.rounds} must be >= 2 and --steps {args.steps} >= 1", file=sys.stderr)
        return 2
    try:
        turns = [float(x) for x in args.turns.split(",")]
    except ValueError:
        turns = []
    if not turns or not all(0 < t < 10_000 for t in turns):
        print(f"error: --turns {args.turns!r}: a comma list of turn lengths in ms, each in (0, 10000)", file=sys.stderr)
        return 2
    if len(os.sched_getaffinity(0)) < 2:
        print("error: this machine gives the script fewer than 2 CPUs; it runs two at once", file=sys.stderr)
        return 2
    for ref in (args.baseline, args.candidate):
        if subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "-q", f"{ref}^{{commit}}"],
                          capture_output=True, check=False).returncode != 0:
            print(f"error: --repo {repo}: no commit {ref!r} there", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        checkouts = {side: tmp / side for side in ("baseline", "candidate")}
        for side, ref in (("baseline", args.baseline), ("candidate", args.candidate)):
            subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(checkouts[side]), ref],
                           check=True, capture_output=True)
        try:
            pairs: dict[str, list] = {}
            for r in range(args.rounds):
                for design in ["solo", *[f"{t:g}" for t in turns]]:
                    pairs.setdefault(design, []).extend(slot(checkouts, design, r, args.case, args.steps, tmp))
        finally:
            for path in checkouts.values():
                subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(path)],
                               capture_output=True, check=False)
    print(f"| design ({args.case}, {args.steps} steps) | ratio {args.candidate} / {args.baseline} | "
          "sd of the slots' log ratio | slots | failed slots | baseline (median) | candidate (median) |")
    print("|---|---|---|---|---|---|---|")
    for design, slots in pairs.items():
        values = [(b, c) for b, c in slots if b and c]
        logs = [math.log(c / b) for b, c in values]
        name = "alone, in turn" if design == "solo" else f"one CPU, turns of {design} ms"
        cells = ([f"{math.exp(statistics.mean(logs)):.3f}", f"{statistics.stdev(logs):.3f}" if len(logs) > 1 else "n/a",
                  len(values), len(slots) - len(values), f"{statistics.median(b for b, _ in values):,.0f}",
                  f"{statistics.median(c for _, c in values):,.0f}"] if values else
                 ["n/a", "n/a", 0, len(slots), "n/a", "n/a"])
        print(f"| {name} | " + " | ".join(str(x) for x in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
