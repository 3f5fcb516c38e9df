"""How long a formal run will take, said before it starts: from this machine's earlier batches
(the machine name carries the host's hardware and the profile), as seconds per case-run."""
from __future__ import annotations

import statistics
from pathlib import Path

from mbaphases import load

RECENT = 5  # the newest batches: the host's speed drifts, older ones tell less


def seconds_per_case_run(batches_dir: Path, profile_functions: bool) -> list[float]:
    """Wall seconds per (run x case) of the newest earlier batches that ran the same way (with or
    without profiled runs), newest last. A batch that recorded no run tells nothing."""
    rates = []
    machine_dir = Path(batches_dir).parent
    for record in load.batch_records(machine_dir.parent, machine_dir.name):
        cases = len(record.get("cases") or [])
        runs = record.get("recorded_runs") or 0
        if not cases or not runs or not record.get("wall_seconds"):
            continue
        if bool(record.get("profile_functions")) != profile_functions:
            continue
        # the environment's build happens once; a batch that made it ran its runs in the rest
        setup = record.get("setup_seconds")
        if setup is None:
            setup = _setup_from_runs(machine_dir, record)
        rates.append((record["wall_seconds"] - setup) / (runs * cases))
    return rates[-RECENT:]


def _setup_from_runs(machine_dir: Path, record: dict) -> float:
    """Seconds from a batch's start to its first run (a record written before batches kept it)."""
    if not record.get("started"):
        return 0.0
    firsts = [m["started"] for m in load.run_meta(machine_dir.parent, machine_dir.name, record["started"])
              if m.get("batch") == record.get("batch")]
    return min(firsts) - record["started"] if firsts else 0.0


def text(batches_dir: Path, plan: str, runs_per_round: int, cases: int, rounds: int, max_rounds: int | None,
         profile_functions: bool, profiled_after_verdicts: bool = False) -> str:
    """One line: the plan (sides, cases, runs, profiles) and its expected wall time, or why there is
    no estimate yet."""
    profiles = (", after the verdicts one profiled run per case a candidate FAILs, of it and of the baseline"
                if profiled_after_verdicts else ", one profiled run per side and case")
    plan = (plan + (f" (up to {max_rounds} while a case is open)" if max_rounds and max_rounds > rounds else "")
            + (profiles if profile_functions else ""))
    rates = seconds_per_case_run(batches_dir, profile_functions)
    if not rates:
        return (f"{plan}; no earlier batch of this machine and profile on this host, so no estimate yet "
                "(the running ETA follows the first runs)")
    rate = statistics.median(rates)
    low = rate * runs_per_round * cases * rounds
    span = _minutes(low) + (f" to {_minutes(rate * runs_per_round * cases * max_rounds)}"
                            if max_rounds and max_rounds > rounds else "")
    return (f"{plan}; estimate {span} (from the {len(rates)} newest earlier batches of this machine; "
            "an environment not built yet adds its build)")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
