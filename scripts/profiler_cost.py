"""What the sampling profiler costs the program it profiles, side by side: the same case run with
no profiler, under py-spy pausing the target at every sample (its default), and under py-spy
reading it without pausing (--nonblocking, the suite's default for Python frames).

    python scripts/profiler_cost.py --checkout demo-target [--profile demo] [--cases a,b] [--reps 3] [--rate 500]

Each repetition runs every mode once per case (a fresh entry process each, the order rotated
every repetition so no mode always runs first), as the suite's profiled runs do (the pins'
profile, py-spy `record --format raw --idle --threads --subprocesses`). Per case and mode it prints
the median active time per vector step, its ratio to the unprofiled runs ("profiled at"), and the
three functions with the most samples as the leaf. Bad input: one `error:` line, exit 2.
"""
from __future__ import annotations

import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import _target  # noqa: E402
from mbaphases import inputs  # noqa: E402
from mbaphases.errors import ArgumentParser, UsageError  # noqa: E402
from mbaphases.run.prepare import pyspy_path  # noqa: E402

MODES = ("none", "paused", "nonblocking")


def leaf_counts(folded: Path) -> collections.Counter:
    """Samples per leaf function (py-spy's raw format: "frame;frame;... count" per line)."""
    counts = collections.Counter()
    for line in folded.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            leaf = stack.split(";")[-1].split(" (")[0]
            counts[leaf] += int(n)
    return counts


def run_once(pins: dict, checkout: Path, entry_rel: str, case: str, mode: str, rate: int, out: Path) -> tuple[float, Path | None]:
    stem = out / f"{_target.case_slug(case)}-{mode}"
    cmd = _target._entry_command({**pins, "cases": [case]}, entry_rel, stem)
    folded = None
    if mode != "none":
        folded = Path(f"{stem}.folded")
        cmd = [pyspy_path(), "record", "--format", "raw", "--rate", str(rate), "--idle", "--threads",
               "--subprocesses", *(["--nonblocking"] if mode == "nonblocking" else []), "-o", str(folded), "--", *cmd]
    env = {**os.environ, **_target.OFFLINE,
           "UNILAB_COLLECTOR_TORCH_THREADS": str(pins["active_profile"]["torch_threads"])}
    p = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"{case} ({mode}): {(p.stderr.strip().splitlines() or ['no output'])[-1]}")
    r = json.loads(Path(f"{stem}.json").read_text())["results"][0]
    return r["total_active_ms"] / r["measure_steps"], folded


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", required=True, help="a checkout of the target (its collector entry inside)")
    ap.add_argument("--pins", default=str(ROOT / "pins.toml"))
    ap.add_argument("--profile", default="demo")
    ap.add_argument("--cases", default="sac/g1_motion_tracking/mujoco,flashsac/g1_walk_flat/motrix")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rate", type=int, default=500)
    try:
        args = ap.parse_args(argv)
        if args.reps < 1:
            raise UsageError(f"--reps {args.reps} must be >= 1")
        if not 10 <= args.rate <= 1000:
            raise UsageError(f"--rate {args.rate} must be within 10-1000 Hz")
        checkout = Path(args.checkout).resolve()
        entry_rel = next((rel for rel in _target.ENTRY_PATHS if (checkout / rel).is_file()), None)
        if entry_rel is None:
            raise UsageError(f"--checkout {args.checkout}: no collector entry inside (paths tried: "
                             f"{', '.join(_target.ENTRY_PATHS)})")
        pins = inputs.load_active_pins(Path(args.pins), args.profile)
        cases = [c.strip() for c in args.cases.split(",") if c.strip()]
        if not cases:
            raise UsageError("--cases names no case")
        pyspy_path()
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    times = collections.defaultdict(list)
    leaves: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for case in cases:
                order = MODES[rep % 3:] + MODES[:rep % 3]
                for mode in order:
                    ms, folded = run_once(pins, checkout, entry_rel, case, mode, args.rate, Path(tmp))
                    times[case, mode].append(ms)
                    if folded is not None:
                        leaves[case, mode] += leaf_counts(folded)
                    print(f"rep {rep + 1} {case} {mode}: {ms:.2f} ms/step", file=sys.stderr, flush=True)
    print(f"| case | mode | active ms per step (median of {args.reps}) | profiled at | top leaf functions (samples) |")
    print("|---|---|---|---|---|")
    for case in cases:
        base = statistics.median(times[case, "none"])
        for mode in MODES:
            med = statistics.median(times[case, mode])
            top = ", ".join(f"`{f}` ({n})" for f, n in leaves[case, mode].most_common(3)) if mode != "none" else ""
            print(f"| {case} | {mode} | {med:.2f} | {med / base:.2f}x | {top} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
