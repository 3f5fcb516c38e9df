"""A machine's stored runs as a committed example: its asv results and raw runs copied from the
suite that measured them into this one, with that suite's folder taken out of every recorded path.

asv names an existing environment after its python's absolute path, and the entry and the batch
record keep the paths they wrote to: in a committed example those read as a required location.
Here each becomes relative to the suite (``/work/x/.venv/bin/python`` -> ``.venv/bin/python``,
``existing-py_work_x_.venv_bin_python`` -> ``existing-py_.venv_bin_python``). No measured value
changes; every JSON file is parsed after it is written.

    python scripts/example.py SUITE MACHINE        # SUITE/results/MACHINE, SUITE/raw-runs/MACHINE -> here
    python scripts/example.py . MACHINE --in-place # a committed example measured before this existed
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbaphases.errors import ScriptParser  # noqa: E402

# the folder of a suite that recorded a path: whatever precedes one of the suite's own folders
_SUITE_PATH = re.compile(r"(/[^\s\"',:;]+?)/(\.venv|raw-runs|results|pins[^/\"]*\.toml|asv[^/\"]*\.conf\.json|\.asv|"
                         r"demo-target|reports|html)\b")
_ENV_NAME = re.compile(r"existing-py_[A-Za-z0-9._+-]*?_?(\.venv_bin_python[0-9.]*)")


def normalised(text: str) -> str:
    """``text`` with the suite's folder taken out of every path into the suite, and of asv's names
    of environments made from such a path."""
    text = _SUITE_PATH.sub(lambda m: m.group(2), text)
    return _ENV_NAME.sub(lambda m: f"existing-py_{m.group(1)}", text)


# py-spy's folded stacks, 10-15 MB a side: the flame graphs are left out of an example, the function
# tables (each profile's JSON) kept
LEFT_OUT = ".folded"


def machine_paths(root: Path, machine: str) -> list[Path]:
    return [p for base in (root / "results" / machine, root / "raw-runs" / machine) if base.is_dir()
            for p in sorted(base.rglob("*")) if p.is_file() and p.suffix != LEFT_OUT]


def export(source: Path, machine: str, dest: Path, in_place: bool) -> list[Path]:
    written = []
    for path in machine_paths(source, machine):
        rel = path.relative_to(source)
        target = dest / rel.parent / normalised(rel.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix in (".json", ".csv", ".log", ".txt", ".toml", ".md"):
            text = normalised(path.read_text())
            if path.suffix == ".json":
                json.loads(text)  # still valid: only path strings changed
            target.write_text(text)
        elif target != path:
            shutil.copy2(path, target)
        if in_place and target != path:
            path.unlink()  # renamed: the file under its normalised name holds the same content
        written.append(target)
    return written


def main(argv=None) -> int:
    p = ScriptParser(description=__doc__.split("\n\n")[0])
    p.add_argument("suite", type=Path, help="the suite that measured the machine's runs")
    p.add_argument("machine", help="the asv machine name (results/MACHINE, raw-runs/MACHINE)")
    p.add_argument("--in-place", action="store_true", help="the machine is already here: normalise it where it is")
    args = p.parse_args(argv)
    source = args.suite.resolve()
    if not machine_paths(source, args.machine):
        p.error(f"no results/{args.machine} or raw-runs/{args.machine} under {source}")
    if (source == ROOT) != args.in_place:
        p.error("--in-place is for a machine of this suite, and only for it")
    written = export(source, args.machine, ROOT, args.in_place)
    print(f"{len(written)} files of {args.machine} under results/ and raw-runs/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
