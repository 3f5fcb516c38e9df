"""Where a raw run's files go: a side's folder of numbered runs (``run<k>.json``, ``.csv``, ``.log``,
``.meta.json``). Standard library only: the benchmarks load it by path in the target's environment
(benchmarks/_target.py), and the fleet's driver numbers the runs a block brings back with it."""
from __future__ import annotations

from pathlib import Path


def next_run(folder: Path) -> int:
    """The next run number in ``folder`` (made where missing), never one already used: a run
    interrupted before its meta was written still owns its number, its files are kept."""
    folder.mkdir(parents=True, exist_ok=True)
    k = 1 + sum(1 for _ in folder.glob("run*.meta.json"))
    while any(folder.glob(f"run{k}.*")):
        k += 1
    return k
