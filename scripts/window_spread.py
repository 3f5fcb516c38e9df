"""How much a run's physics time varies with the length of its measured window, with one CPU hog
spinning: the demo's mba-dev and opt/mujoco-dispatch, each run a fresh entry process at the
known-answer test's sizes, interleaved rounds, each window length in every round.

    python scripts/window_spread.py [--rounds 8] [--steps 40,120]

Prints per side and window: the runs' physics (ms per vector step), their standard deviation and
the wall time a run took. The numbers behind the known-answer test's 120 steps (docs/log/measurements.md).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "suite"), str(ROOT / "tests"), str(ROOT)]

import test_demo_history as known  # noqa: E402 -- the test's case, sizes, entry and checkouts

SIDES = ("mba-dev", "opt/mujoco-dispatch")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", default="40,120", help="comma list of measured steps a run")
    a = p.parse_args()
    try:
        steps = [int(x) for x in a.steps.split(",")]
    except ValueError:
        print(f"error: --steps {a.steps!r} is not a comma list of integers", file=sys.stderr)
        return 2
    if a.rounds < 2 or any(s < 1 for s in steps):
        print(f"error: --rounds {a.rounds} must be >= 2 and every --steps >= 1", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="window-spread-"))
    dirs = known.checkouts(tmp, SIDES)
    env = {**os.environ, **known.ENTRY_ENV}
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    runs = {}
    try:
        for r in range(a.rounds):
            for n in steps:
                for name in (SIDES if r % 2 == 0 else SIDES[::-1]):
                    out = tmp / "raw" / f"{name.replace('/', '_')}-{n}-{r}.json"
                    started = time.time()
                    subprocess.run([sys.executable, known.ENTRY, "--cases", known.CASE, *known.sizes(n),
                                    "--out-json", str(out)],
                                   cwd=dirs[name], env=env, check=True, capture_output=True)
                    doc = json.loads(out.read_text())["results"][0]
                    runs.setdefault((name, n), []).append((doc["physics_ms_per_vector_step"]["mean_ms"],
                                                           time.time() - started))
    finally:
        hog.kill()
    for (name, n), values in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        physics = [v for v, _ in values]
        print(f"{n:>4} steps  {name:<20} physics {', '.join(f'{v:.2f}' for v in physics)}  "
              f"sd {statistics.stdev(physics):.2f} ms  wall {statistics.mean(w for _, w in values):.1f} s a run")
    print(f"runs kept under {tmp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
