"""The batch record (raw-runs/<machine>/batches/<batch>.json): the plan, the attempts, how the batch
ended. Written whole at the batch's start (``running``) and at its end; resume, the estimates and the
reports read it."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from mbaphases import load, staging


def summarize(metas: list[dict], sides: dict[str, str]) -> tuple[list[str], list[str]]:
    """(failures, warnings) as lines: which case, side and run failed; busy runs."""
    failures, warnings = [], []
    for m in sorted(metas, key=lambda m: m["started"]):
        side = sides.get(m["commit"], m["commit"][:10])
        for case, msg in sorted(m.get("failed_cases", {}).items()):
            failures.append(f"FAILED {case} | side {side} | run {m['run']} | {msg}")
        warnings += [f"BUSY {side} run {m['run']}: {note}" for note in load.busy_notes(m)]
    return failures, warnings


def finish(record: dict, machine_dir: Path, started: float, names: dict, done_runs: int,
           runs_by_side: dict, rc: int, out, resume_hint: str, runs_under: str | None = None) -> int:
    """The batch's end: failures and flagged runs said, the batch record written, the exit status.
    ``runs_under``: the machine folders holding its runs (a pattern; default the batch's machine)."""
    metas = [m for m in load.run_meta(machine_dir.parent, runs_under or machine_dir.name, started, out)
             if m.get("batch") == record["batch"]]
    failures, warnings = summarize(metas, names)
    for line in warnings + failures:
        print(line, file=out)
    entry_s = sum(m.get("ended", 0) - m.get("started", 0) for m in metas)
    ended = time.time()
    record["attempts"][-1].update(ended=ended, **({"interrupted": record["interrupted"]} if "interrupted" in record else {}))
    # a resumed batch's wall time is its attempts', not the pause between them
    wall_s = sum(a["ended"] - a["started"] for a in record["attempts"])
    # before the first run: asv's start and, the first time, the environment's build (once per
    # environment, so the estimate leaves it out)
    record["setup_seconds"] = min(m["started"] for m in metas) - started if metas else None
    expected = sum(runs_by_side.values())
    stopped = (record.get("deadline") or {}).get("not_started", 0) > 0
    # a batch whose planned runs were not all recorded (a full disk) can be resumed, as an interrupted one;
    # so can one its deadline stopped (its completed runs are its runs, the rest never started)
    state = ("interrupted" if "interrupted" in record else "deadline" if stopped
             else "incomplete" if len(metas) < expected else "finished")
    record.update(ended=ended, runs_per_side=done_runs, runs_by_side=runs_by_side, entry_seconds=entry_s,
                  wall_seconds=wall_s, entry_share=entry_s / wall_s if wall_s else None, recorded_runs=len(metas),
                  state=state)
    if state == "deadline":
        print(f"stopped at the deadline: {record['deadline']['not_started']} planned units never started, "
              f"{len(metas)} runs recorded; the report decides on those; {resume_hint}", file=out)
    if state == "incomplete":
        print((no_room([machine_dir, Path(record["config"]).parent]) or
               f"{expected - len(metas)} planned runs left no record (see above)") + f"; {resume_hint}", file=out)
    try:
        write(machine_dir, record)
    except OSError as e:
        # the record of its start stays: --resume finds the batch
        print(f"the batch record could not be written under {machine_dir / 'batches'} ({e.strerror or e})", file=out)
        rc = rc or 1
    print(f"{len(metas)} of {expected} runs recorded under {machine_dir}; "
          f"{len(failures)} failed case-runs; asv exit {rc}", file=out)
    print(f"entry time {entry_s:.0f} s of {wall_s:.0f} s wall ({entry_s / wall_s:.0%} inside the entry processes)"
          if wall_s else "", file=out)
    if rc == 130:
        return rc
    # a failed case or run is a verdict on the run (1), never asv's own exit code (2 reads as bad input)
    # the deadline's stop leaves runs unplanned, not failed: the report says what is open
    return 1 if failures or (len(metas) < expected and not stopped) or rc else 0


def no_room(folders: list[Path]) -> str | None:
    """A line naming the first of ``folders`` whose file system is full, if one is."""
    for folder in folders:
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            continue
        if free < 1 << 20:
            return (f"no space left on the file system of {folder} ({free // 1024} KiB free): the runs after that "
                    "could not be written; make room")
    return None


def write(machine_dir: Path, record: dict) -> None:
    """The batch's record, replaced whole: at its start (its plan, ``running``) and at its end."""
    batches = machine_dir / "batches"
    batches.mkdir(parents=True, exist_ok=True)
    staging.write_text_atomic(batches / f"{record['batch']}.json", json.dumps(record, indent=2) + "\n")


def how_it_ended(record: dict) -> str:
    if record.get("interrupted"):
        return f"interrupted by {record['interrupted']}"
    if record.get("state") == "incomplete":
        return f"{record.get('recorded_runs', 0)} of its planned runs recorded"
    return "its command ended without recording its end (killed, or its disk full)"


def recorded_batch(pins_path: Path) -> dict | None:
    """The newest batch record that ran ``pins_path`` (batch records of every machine, under the
    working directory's raw-runs/ and the pins' folder's) whose asv config still exists."""
    pins_path = Path(pins_path).resolve()
    found = [r for root in {Path.cwd().resolve(), pins_path.parent} for r in load.batch_records(root / "raw-runs")
             if r.get("pins") == str(pins_path) and r.get("config") and Path(r["config"]).is_file()]
    return max(found, key=lambda r: (r.get("started", 0), r.get("batch", ""))) if found else None


def recorded_config(pins_path: Path) -> Path | None:
    """The asv config of the newest batch that ran ``pins_path``, if it still exists."""
    record = recorded_batch(pins_path)
    return Path(record["config"]) if record else None


