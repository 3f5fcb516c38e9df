"""Going on with an interrupted batch (``mbaphases run --resume``): which batch, and what of its
plan its stored runs already cover.

A batch record is written when the batch starts (``"state": "running"``) and replaced when it ends
(``"finished"``, ``"interrupted"``, or ``"incomplete"``: planned runs left no record, as on a full
disk); a batch whose command was killed outright keeps the first.
Either unfinished kind can be resumed: its kept runs stay its runs (one stratum with the new ones),
and only what is missing runs.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from mbaphases import load
from mbaphases.errors import UsageError


def unfinished(record: dict) -> bool:
    """Interrupted, killed (still ``running``), or ended with planned runs unrecorded (``incomplete``)."""
    return record.get("state", "finished") != "finished" or bool(record.get("interrupted"))


def newest_record(machine_dir: Path, pins_path: str) -> dict | None:
    """The newest batch record of ``machine_dir`` that ran ``pins_path``."""
    ran = [r for r in load.batch_records(machine_dir.parent, machine_dir.name)
           if r.get("pins") == str(Path(pins_path).resolve())]
    return ran[-1] if ran else None


def check_sides(record: dict, sides: list[dict]) -> None:
    """The sides the pins name now must be the batch's: a ref moved since is a new batch."""
    then = {x["label"]: x["sha"] for x in record["sides"]}
    for x in sides:
        if then.get(x["label"]) != x["sha"]:
            was = then.get(x["label"])
            raise UsageError(f"--resume: side {x['label']!r} ({x['ref']}) is commit {x['sha'][:12]} now"
                             + (f", {was[:12]} in batch {record['batch']}" if was else f", not a side of batch {record['batch']}")
                             + "; run without --resume to start a new batch")


def runs_done(metas: list[dict], batch: str) -> Counter:
    """Completed runs of the batch per commit (a run counts once its record is written, whatever
    its cases did)."""
    return Counter(m["commit"] for m in metas if m.get("batch") == batch)


def pairs_done(metas: list[dict], batch: str) -> set[str]:
    """Pairs of the batch (``<batch>/r<k>p<i>``) of which both sides completed their run."""
    sides_of = Counter((m.get("duet") or {}).get("pair") for m in metas if m.get("batch") == batch)
    return {pair.split("/", 1)[1].split(".")[0] for pair, n in sides_of.items() if pair and n >= 2}


def missing_rounds(done: Counter, shas: list[str], runs: int) -> list[list[str]]:
    """Rounds that bring every side to ``runs`` runs: round j holds the sides with fewer than
    done + j + 1 (in the batch's order, reversed every other round as asv interleaves)."""
    rounds = []
    for j in range(max((runs - done[s] for s in shas), default=0)):
        order = [s for s in shas if done[s] + j < runs]
        rounds.append(order if j % 2 == 0 else order[::-1])
    return rounds
