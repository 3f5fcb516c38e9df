"""The turn bias, corrected: how far a ratio taken in turns sits from the same sides' ratio alone at
the same CPUs, measured per profile and host class and per candidate, kept as data (turn_bias.toml,
each correction with the command that measured it and the studies' JSON it is computed from).

Per studied candidate (its commit and its baseline's), a random-effects model over its cases
predicts the bias of one of its cases: their weighted mean, its standard error the spread between
cases and the mean's own error in quadrature (correction_from). A gate decided from pairs in turns
subtracts the prediction from its log ratio and adds its standard error in quadrature to the
interval's own (mbaphases.stats.intervals.correct_bias), and says so in its note.

Any other candidate of a class, a user's new one included, gets the class's prediction across
candidates: with three studied candidates or more, the random-effects mean of the candidates' biases
and its prediction error (the spread between candidates in it); with fewer (the candidates may
disagree in sign: on the demo at two CPUs MBA next reads 3.5% slower in turns and MBA dev 4.0%
faster), no bias is corrected and the error taken is that of the largest studied correction
(sqrt(bias^2 + se^2)). A class never studied gets the same from the largest correction on record for
as many CPUs a run, else of all. The note says which.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

from mbaphases import turns
from mbaphases.stats import intervals

CORRECTIONS_FILE = Path(__file__).with_name("turn_bias.toml")


@dataclass(frozen=True)
class Correction:
    profile: str
    cpu: str
    cpus: int  # the CPUs a run had (the slot)
    baseline: str  # the commits the studies measured (the candidate's ratio against this baseline)
    candidate: str
    label: str  # the candidate's name in the studies
    bias: float  # log scale: the predicted (ratio in turns) - (ratio alone) of one of its cases
    mean_se: float  # the standard error of the candidate's mean bias over its cases
    se: float  # the prediction's standard error for one case (the spread between cases in it)
    df: int  # its t's degrees of freedom (cases - 2)
    measured: str  # what was measured, when, with which command (docs/statistics.md has the table)
    data: tuple[str, ...] = ()  # the studies' JSON (scripts/turn_bias.py --json), relative to the suite

    def describe(self) -> str:
        return f"{self.profile} profile on {self.cpu}, {self.cpus} CPU{'s' if self.cpus != 1 else ''} a run"


def corrections(path: Path | None = None) -> list[Correction]:
    data = tomllib.loads((path or CORRECTIONS_FILE).read_text())
    return [Correction(str(c["profile"]), str(c["cpu"]), int(c["cpus"]), str(c["baseline"]), str(c["candidate"]),
                       str(c["label"]), float(c["bias"]), float(c["mean_se"]), float(c["se"]), int(c["df"]),
                       str(c["measured"]), tuple(c.get("data", []))) for c in data.get("correction", [])]


@dataclass(frozen=True)
class Applied:
    """The correction a gate applies: bias (log), its standard error and df, and where it comes from."""
    bias: float
    se: float
    df: float
    how: str  # "studied", "class" (predicted across the class's candidates) or "none" (error only)
    source: Correction  # the study it comes from (for "class" and "none": the largest of the class)


def applying(profile: str | None, cpu: str | None, cpus: int | None, baseline: str | None = None,
             candidate: str | None = None, known: list[Correction] | None = None) -> Applied | None:
    """The correction for a gate of ``candidate`` against ``baseline`` (commits) from these runs' class
    (module docstring); None with nothing on record."""
    known = corrections() if known is None else known
    if not known:
        return None
    of_class = [c for c in known if (c.profile, c.cpu, c.cpus) == (profile, cpu, cpus)]
    for c in of_class:
        if (c.baseline, c.candidate) == (baseline, candidate):
            return Applied(c.bias, c.se, c.df, "studied", c)
    if len(of_class) >= 3:
        across = intervals.bias_bound([c.bias for c in of_class], [c.mean_se for c in of_class],
                                      spread_level=intervals.PREDICTION_SPREAD_LEVEL)
        spread = max(c.se ** 2 - c.mean_se ** 2 for c in of_class)  # the widest spread between a candidate's cases
        return Applied(across.mean, math.sqrt(across.prediction_se ** 2 + max(spread, 0.0)), across.df, "class",
                       max(of_class, key=lambda c: abs(c.bias)))
    pool = of_class or [c for c in known if c.cpus == cpus] or known
    worst = max(pool, key=lambda c: c.bias ** 2 + c.se ** 2)
    return Applied(0.0, math.hypot(worst.bias, worst.se), worst.df, "none", worst)


def _se(d: dict) -> float | None:
    if d.get("se"):
        return float(d["se"])
    if d.get("lower") is None:
        return None
    return (d["upper"] - d["lower"]) / (2 * float(stats.t.ppf(0.95, d["pairs"] - 1)))


def correction_from(studies: list[dict], turn_ms: float = turns.DEFAULT_TURN_MS) -> intervals.BiasBound | None:
    """The random-effects prediction from studies' JSON (scripts/turn_bias.py --json, each naming its
    candidate): every (candidate, case) is one true bias; where several studies measured it, their
    estimates combine by inverse variance first. Then the (candidate, case)s' weighted mean with the
    spread between them (mbaphases.stats.intervals.bias_bound: its prediction_se and df)."""
    per_cell: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for study in studies:
        for d in study["differences"]:
            se = _se(d)
            if d["turn_ms"] == turn_ms and se:
                per_cell.setdefault((study["candidate"], d["case"]), []).append((d["log_difference"], se))
    estimates, ses = [], []
    for xs in per_cell.values():
        w = [1 / se ** 2 for _, se in xs]
        estimates.append(sum(wi * x for wi, (x, _) in zip(w, xs)) / sum(w))
        ses.append(sum(w) ** -0.5)
    return intervals.bias_bound(estimates, ses, spread_level=intervals.PREDICTION_SPREAD_LEVEL)


def summary_of(study: dict) -> list[dict]:
    """Per turn length of one study: the prediction it gives alone (scripts/turn_bias.py prints it)."""
    out = []
    for turn_ms in sorted({d["turn_ms"] for d in study["differences"]}):
        found = correction_from([study], turn_ms)
        if found is not None:
            out.append({"turn_ms": turn_ms, "cases": found.cases, "bias": found.mean, "mean_se": found.mean_se,
                        "between_sd": found.between_sd, "se": found.prediction_se, "df": found.df})
    return out


def note(found: Applied, confidence: float) -> str:
    c = found.source
    if found.how == "studied":
        what = (f"corrected for this candidate's turn bias {math.expm1(found.bias):+.1%} (se {found.se:.1%}; "
                f"measured as {c.label}, {c.describe()})")
    elif found.how == "class":
        what = (f"corrected for the turn bias predicted across the candidates studied for this profile and host "
                f"class, {math.expm1(found.bias):+.1%} (se {found.se:.1%}, {c.describe()})")
    else:
        what = (f"no turn bias studied for this candidate in these runs' profile and host class: none corrected, its "
                f"error taken as {found.se:.1%} (the largest correction on record: {c.label}, {c.describe()})")
    return (f"; {what}, its error added in quadrature: a {confidence:.0%} interval for each side alone at these CPUs "
            "(mbaphases/turn_bias.toml, docs/statistics.md)")
