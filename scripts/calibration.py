"""The calibration study of every interval procedure (mbaphases.stats.calibration) as a Markdown
table, written between its markers in docs/statistics.md (or to stdout with --stdout).

    python scripts/calibration.py [--datasets 300] [--stdout]

Seeded: the same table every run. Bad input: one error line, exit 2."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from mbaphases.errors import ScriptParser
from mbaphases.stats import calibration

DOC = Path(__file__).resolve().parents[1] / "docs" / "statistics.md"
BEGIN, END = "<!-- calibration table: scripts/calibration.py -->", "<!-- end of the calibration table -->"
FDP_DATASETS = 200




def main(argv=None) -> int:
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=300, help="data sets per procedure and scenario (>= 50)")
    parser.add_argument("--stdout", action="store_true", help="print the table instead of writing it")
    args = parser.parse_args(argv)
    if args.datasets < 50:
        parser.error(f"--datasets {args.datasets}: valid is at least 50 (fewer say nothing about coverage)")
    if not args.stdout and BEGIN not in DOC.read_text():
        parser.error(f"{DOC} has no line {BEGIN!r}: valid is the document with its markers")
    rows = calibration.study(args.datasets)
    fdp = calibration.marks_fdp(np.random.default_rng(calibration.SEED), FDP_DATASETS, 0.90)
    table = calibration.markdown(rows, fdp, 0.10, FDP_DATASETS)
    if args.stdout:
        print(table, end="")
        return 0
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(f"{head}{BEGIN}\n\n{table}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
