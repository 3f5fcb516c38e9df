"""The turn bias, bounded: how far a ratio taken in turns may sit from the same sides' ratio alone
at the same CPUs, measured per profile and host class and kept as data (turn_bias.toml, each bound
with the command that measured it and the studies' JSON it is computed from: a random-effects 90%
prediction interval for one case's bias, mbaphases.stats.intervals.bias_bound). A gate decided from
pairs in turns widens its interval by the bound that applies, on the log scale (the estimate stays),
and says so in its note: a verdict then holds for the program alone, not only for the program sharing
its slot. Where no bound was measured for the runs' profile and host class, the largest bound on
record for runs of as many CPUs applies (else the largest of all), and the note says that.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

from mbaphases.stats import intervals

BOUNDS_FILE = Path(__file__).with_name("turn_bias.toml")


@dataclass(frozen=True)
class Bound:
    profile: str
    cpu: str
    cpus: int  # the CPUs a run had (the slot)
    bound: float  # log scale: the 90% prediction interval's farther end for a case's bias (bounds_from)
    measured: str  # what was measured, when, with which command (docs/statistics.md has the table)
    data: tuple[str, ...] = ()  # the studies' JSON (scripts/turn_bias.py --json), relative to the suite

    def describe(self) -> str:
        return f"{self.profile} profile on {self.cpu}, {self.cpus} CPU{'s' if self.cpus != 1 else ''} a run"


def bounds(path: Path | None = None) -> list[Bound]:
    data = tomllib.loads((path or BOUNDS_FILE).read_text())
    return [Bound(str(b["profile"]), str(b["cpu"]), int(b["cpus"]), float(b["bound"]), str(b["measured"]),
                  tuple(b.get("data", []))) for b in data.get("bound", [])]


def applying(profile: str | None, cpu: str | None, cpus: int | None,
             known: list[Bound] | None = None) -> tuple[Bound, bool] | None:
    """(the bound for these runs, whether it was measured for exactly their profile and host class);
    where none was, the largest on record for runs of as many CPUs (taking turns costs a pool of N
    threads what it costs, whatever the program: at one thread a run the bound is log 0.012, at two
    0.069), else the largest on record (None with no bound on record at all)."""
    known = bounds() if known is None else known
    if not known:
        return None
    for b in known:
        if (b.profile, b.cpu, b.cpus) == (profile, cpu, cpus):
            return b, True
    same_cpus = [b for b in known if b.cpus == cpus]
    return max(same_cpus or known, key=lambda b: b.bound), False


def bounds_from(differences: list[dict], confidence: float = 0.90) -> list[dict]:
    """Per turn length, the bound from studies' per-case differences (scripts/turn_bias.py's JSON
    ``differences``, of one study or several concatenated): each case's mean log difference over its
    paired slots with its standard error (or the 90% t interval it came with). A case measured in
    several studies has one true bias: its estimates are combined by inverse variance first. Then the
    random-effects prediction interval for a case's bias (mbaphases.stats.intervals.bias_bound), whose
    farther end turn_bias.toml keeps."""
    out = []
    for turn_ms in sorted({d["turn_ms"] for d in differences}):
        per_case: dict[str, list[tuple[float, float]]] = {}
        for d in differences:
            if d["turn_ms"] == turn_ms and (d.get("se") or d.get("lower") is not None):
                se = d.get("se") or (d["upper"] - d["lower"]) / (2 * float(stats.t.ppf(0.95, d["pairs"] - 1)))
                per_case.setdefault(d["case"], []).append((d["log_difference"], se))
        weights = {case: [1 / se ** 2 for _, se in xs] for case, xs in per_case.items()}
        estimates = [sum(w * x for w, (x, _) in zip(weights[c], xs)) / sum(weights[c]) for c, xs in per_case.items()]
        ses = [sum(weights[c]) ** -0.5 for c in per_case]
        found = intervals.bias_bound(estimates, ses, confidence)
        if found is not None:
            out.append({"turn_ms": turn_ms, "cases": found.cases, "mean": found.mean, "mean_se": found.mean_se,
                        "between_sd": found.between_sd, "lower": found.lower, "upper": found.upper,
                        "bound": found.bound, "confidence": confidence})
    return out


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
