"""The turn bias, bounded: how far a ratio taken in turns may sit from the same sides' ratio alone
at the same CPUs, measured per profile and host class and kept as data (turn_bias.toml, each bound
with the command that measured it). A gate decided from pairs in turns widens its interval by the
bound that applies, on the log scale (the estimate stays), and says so in its note: a verdict then
holds for the program alone, not only for the program sharing its slot. Where no bound was measured
for the runs' profile and host class, the largest bound on record for runs of as many CPUs applies
(else the largest of all), and the note says that.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

BOUNDS_FILE = Path(__file__).with_name("turn_bias.toml")


@dataclass(frozen=True)
class Bound:
    profile: str
    cpu: str
    cpus: int  # the CPUs a run had (the slot)
    bound: float  # the largest |log(ratio in turns) - log(ratio alone)| over the measured cases
    measured: str  # what was measured, when, with which command (docs/statistics.md has the table)

    def describe(self) -> str:
        return f"{self.profile} profile on {self.cpu}, {self.cpus} CPU{'s' if self.cpus != 1 else ''} a run"


def bounds(path: Path | None = None) -> list[Bound]:
    data = tomllib.loads((path or BOUNDS_FILE).read_text())
    return [Bound(str(b["profile"]), str(b["cpu"]), int(b["cpus"]), float(b["bound"]), str(b["measured"]))
            for b in data.get("bound", [])]


def applying(profile: str | None, cpu: str | None, cpus: int | None,
             known: list[Bound] | None = None) -> tuple[Bound, bool] | None:
    """(the bound for these runs, whether it was measured for exactly their profile and host class);
    where none was, the largest on record for runs of as many CPUs (taking turns costs a pool of N
    threads what it costs, whatever the program: at one thread a run the bias measured 2.1%, at two
    8.9%), else the largest on record (None with no bound on record at all)."""
    known = bounds() if known is None else known
    if not known:
        return None
    for b in known:
        if (b.profile, b.cpu, b.cpus) == (profile, cpu, cpus):
            return b, True
    same_cpus = [b for b in known if b.cpus == cpus]
    return max(same_cpus or known, key=lambda b: b.bound), False


def widen(lower: float, upper: float, bound: float) -> tuple[float, float]:
    """A ratio's interval widened by the bound on each side (log scale)."""
    return lower * math.exp(-bound), upper * math.exp(bound)


def note(found: tuple[Bound, bool]) -> str:
    b, exact = found
    where = (f"measured for this profile and host class ({b.describe()})" if exact else
             f"no bound measured for these runs' profile and host class: the largest on record for as many CPUs "
             f"a run (else any), {b.describe()}")
    return (f"; widened by the turn-bias bound ±{math.expm1(b.bound):.1%} ({where}; mbaphases/turn_bias.toml, "
            "docs/statistics.md): the verdict holds for each side alone at these CPUs")
