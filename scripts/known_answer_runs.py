"""Read back the runs the known-answer test kept (pytest --basetemp=DIR, one DIR per run of the
module): per run, the own phases' largest p-value, the other story phases' smallest one, and
whether the ledger marked any other phase (the claim the test made before it tested for a leak).

    python scripts/known_answer_runs.py DIR [DIR ...]

The numbers behind the one-hog log in docs/log/measurements.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "suite"), str(ROOT / "tests"), str(ROOT)]

import test_demo_history as known  # noqa: E402


def kept_runs(history: Path) -> dict[str, list[str]] | None:
    files = {name: [known.run_file(history, name, r) for r in range(known.ROUNDS)] for name in known.MEASURED}
    if not all(path.is_file() for paths in files.values() for path in paths):
        return None
    return {name: [str(path) for path in paths] for name, paths in files.items()}


def main() -> int:
    dirs = [Path(a) for a in sys.argv[1:]]
    histories = [d / "history0" for d in dirs]
    missing = [str(d) for d, h in zip(dirs, histories) if not h.is_dir()]
    if not dirs or missing:
        print(f"error: {', '.join(missing) or 'no DIR given'}: give the --basetemp folders of known-answer "
              "runs (each holding history0/)", file=sys.stderr)
        return 2
    would_fail = 0
    for d, history in zip(dirs, histories):
        files = kept_runs(history)
        if files is None:
            print(f"{d}: incomplete (fewer than {known.ROUNDS} runs of a commit)")
            continue
        rows = known.optimization_rows((history, files))
        own = max(row[f"{o.phase}_p"] for o, row in zip(known.OPTIMIZATIONS, rows))
        others = [(o.name, part, row) for o, row in zip(known.OPTIMIZATIONS, rows) for part in known.STORY
                  if part != o.phase]
        marked = [f"{name} {part} {row[f'{part}_ms']:+.3f} ms p={row[f'{part}_p']:.2g}"
                  for name, part, row in others if row[f"{part}_clear"] is True]
        would_fail += bool(marked)
        print(f"{d}: own phases' largest p {own:.2g}; other phases' smallest p "
              f"{min(row[f'{part}_p'] for _, part, row in others):.2g}; other phases marked: {'; '.join(marked) or 'none'}")
    print(f"runs with another phase marked: {would_fail} of {len(dirs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
