"""How much slower each side's profiled runs ran than its measured ones, on a machine's stored runs:
per side and case, the profiled run's active time per step over the median of the side's measured
runs of the case (what the report prints as "profiled at" beside a function table), and the median
over every side and case.

    python scripts/profiled_slowdown.py --machine vm-75e01b-demo-duet [--raw-dir raw-runs]

Bad input: one error line, exit 2."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from mbaphases.errors import ArgumentParser, UsageError


def slowdowns(machine_dir: Path) -> list[tuple[str, str, float]]:
    """(commit, case, profiled over measured) for every profiled case with measured runs."""
    out = []
    for commit_dir in sorted(p for p in machine_dir.iterdir() if p.is_dir() and p.name != "batches"):
        measured: dict[str, list[float]] = {}
        for run in commit_dir.glob("run*.json"):
            if run.name.endswith(".meta.json"):
                continue
            for r in json.loads(run.read_text()).get("results", []):
                c = r["case"]
                measured.setdefault(f"{c['algo']}/{c['task']}/{c['sim']}", []).append(r["total_active_ms"] / r["measure_steps"])
        for record in commit_dir.glob("profile/*/profile.json"):
            for case, row in json.loads(record.read_text())["cases"].items():
                entry_out = record.parent / row["folded"].replace(".folded", ".json")
                if case not in measured or not entry_out.is_file():
                    continue
                results = json.loads(entry_out.read_text()).get("results", [])
                if results:
                    per_step = results[0]["total_active_ms"] / results[0]["measure_steps"]
                    out.append((commit_dir.name[:10], case, per_step / float(np.median(measured[case]))))
    return out


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--machine", required=True)
    p.add_argument("--raw-dir", default="raw-runs")
    try:
        args = p.parse_args(argv)
        machine_dir = Path(args.raw_dir) / args.machine
        if not machine_dir.is_dir():
            raise UsageError(f"--machine {args.machine}: no stored runs under {machine_dir}")
        rows = slowdowns(machine_dir)
        if not rows:
            raise UsageError(f"--machine {args.machine}: no profiled run with measured runs under {machine_dir}")
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("| commit | case | profiled at |\n|---|---|---|")
    for commit, case, x in rows:
        print(f"| {commit} | {case} | {x:.2f}x |")
    values = [x for *_, x in rows]
    print(f"\nmedian {np.median(values):.2f}x over {len(values)} side/case cells ({min(values):.2f}-{max(values):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
