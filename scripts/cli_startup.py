"""How long `mbaphases <command> --help` takes to start, for this checkout and others side by side
(alternating, so the host's drift falls on all alike): the time every command pays before it works.

    python scripts/cli_startup.py --other /path/to/older/checkout --times 10
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--other", action="append", default=[], help="another checkout of the suite (repeatable)")
    p.add_argument("--command", default="run", help="the command whose --help is timed (default: run)")
    p.add_argument("--times", type=int, default=10)
    args = p.parse_args()
    if args.times < 1:
        print(f"error: --times {args.times}: must be at least 1", file=sys.stderr)
        return 2
    folders = [ROOT, *(Path(o).resolve() for o in args.other)]
    for folder in folders:
        if not (folder / "mbaphases" / "cli.py").is_file():
            print(f"error: --other {folder}: not a checkout of the suite (no mbaphases/cli.py); valid: a folder "
                  "holding one", file=sys.stderr)
            return 2
    # the suite's own parser says which commands there are: its one error line is this script's
    said = subprocess.run([sys.executable, "-m", "mbaphases.cli", args.command, "--help"], cwd=ROOT,
                          capture_output=True, text=True)
    if said.returncode != 0:
        print(f"error: --command {args.command!r}: {said.stderr.strip().splitlines()[-1].removeprefix('error: ')}",
              file=sys.stderr)
        return 2
    took: dict[Path, list[float]] = {f: [] for f in folders}
    for _ in range(args.times):
        for folder in folders:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "mbaphases.cli", args.command, "--help"], cwd=folder,
                           capture_output=True, check=True)
            took[folder].append(time.perf_counter() - start)
    first = statistics.median(took[ROOT])
    for folder, seconds in took.items():
        print(f"{folder}: median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f}), "
              f"{statistics.median(seconds) / first:.2f} x this checkout's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
