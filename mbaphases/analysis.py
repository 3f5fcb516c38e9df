"""The report's analysis: from the sides to the figures a maintainer decides on. One candidate
against the baseline (Report: throughput, phases, attribution, dispersion, gate, functions) and
many candidates at once (Overview: the reports, the ledger, additivity). Nothing here formats."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from mbaphases import comparable, profiles, tables
from mbaphases import gate as gate_mod
from mbaphases import ledger as ledger_mod
from mbaphases.load import hardware_differences
from mbaphases.side import Side
from mbaphases.stats.intervals import FamilyMarks
from mbaphases.stats.rules import DEFAULT_CONFIDENCE, DEFAULT_THRESHOLD


@dataclass
class Report:
    baseline: Side
    candidate: Side
    cases: list[str]
    throughput: pd.DataFrame
    phases: pd.DataFrame
    attribution: pd.DataFrame
    dispersion: pd.DataFrame
    gate: pd.DataFrame
    verdict: str
    threshold: float
    min_runs: int
    environment: pd.DataFrame
    input_kind: str
    cross_machine: list[str]  # hardware differences the user declared intended
    confidence: float
    notes: list[str]  # about how the runs were taken (e.g. repeated looks)
    functions: pd.DataFrame = field(default_factory=pd.DataFrame)  # the functions behind the flagged phases
    flames: dict[str, str] = field(default_factory=dict)  # case -> differential flame graph (SVG)
    family: FamilyMarks | None = None  # the attribution's changes as one family of questions
    min_share: float = tables.MIN_SHARE


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, list):
            out[key] = ", ".join(map(str, v))
        else:
            out[key] = v
    return out


def environment_table(b: Side, c: Side) -> pd.DataFrame:
    fb = {"revision": b.revision, "label": b.label, **_flatten(b.pins, "pins."), **_flatten(b.environment)}
    fc = {"revision": c.revision, "label": c.label, **_flatten(c.pins, "pins."), **_flatten(c.environment)}
    rows = []
    for k in list(dict.fromkeys(list(fb) + list(fc))):
        if k.endswith("python_executable"):
            continue
        vb, vc = fb.get(k), fc.get(k)
        rows.append({"key": k, "baseline": vb, "candidate": vc,
                     "differs": k not in ("revision", "label") and vb != vc})
    return pd.DataFrame(rows)


def package_differences(b: Side, c: Side) -> str | None:
    """The installed packages that differ between the sides' environments, in one line (None when
    an environment records no package list)."""
    pb = ((b.environment or {}).get("install") or {}).get("installed")
    pc = ((c.environment or {}).get("install") or {}).get("installed")
    if not pb or not pc:
        return None
    changed = [f"{n} {pb.get(n, 'absent')} → {pc.get(n, 'absent')}" for n in sorted(set(pb) | set(pc), key=str.lower)
               if pb.get(n) != pc.get(n)]
    if not changed:
        return "installed packages: identical"
    return f"installed packages: differ {'only ' if len(changed) <= 3 else ''}in {'; '.join(changed)}"


def build(b: Side, c: Side, threshold: float = DEFAULT_THRESHOLD, min_runs: int = 3, exceptions=None,
          dispersion_limit: float = 0.05, pinned_cases: list[str] | None = None, input_kind: str = "asv",
          cross_machine: bool = False, confidence: float = DEFAULT_CONFIDENCE,
          notes: list[str] | None = None, min_share: float = tables.MIN_SHARE,
          paired: comparable.PairedBatch | None = None) -> Report:
    """``paired``: every side of the comparison's batches (the baseline and all candidates) with the
    fit of their pairs, through which round-robin sides are gated."""
    (b, b_note), (c, c_note) = comparable.current_protocol(b), comparable.current_protocol(c)
    # only the batches both sides ran in are compared (mbaphases.comparable)
    b, c, batch_notes = comparable.pair(b, c)
    notes = list(notes or []) + [n for n in (b_note, c_note) if n] + batch_notes
    packages = package_differences(b, c)
    if packages:
        notes.append(packages)
    cases = tables.case_order(b, c, pinned_cases)
    thr = tables.throughput_table(b, c, cases)
    disp = tables.dispersion_table(b, c, cases, dispersion_limit)
    hw = hardware_differences(b, c)
    gate_rows = gate_mod.evaluate(b, c, cases, threshold, min_runs, exceptions or {},
                                  hardware_diff=None if cross_machine else hw, confidence=confidence,
                                  block_fits=paired.fits if paired else None)
    robustness(gate_rows, b, c, cases, threshold, min_runs, exceptions or {},
               None if cross_machine else hw, confidence, paired)
    # a case's FAIL speaks for the candidate at the family's level (gate.verdict)
    family_level = gate_mod.family_confidence(confidence, gate_rows)
    family_rows = gate_mod.evaluate(b, c, cases, threshold, min_runs, exceptions or {},
                                    hardware_diff=None if cross_machine else hw, confidence=family_level,
                                    block_fits=paired.fits if paired else None)
    for row, at_family in zip(gate_rows, family_rows):
        row.update(family_confidence=family_level, family_gate=at_family["gate"])
    notes.append("verdict: " + gate_mod.verdict_rule(confidence, family_level, gate_mod.cases_with_interval(gate_rows)))
    att, family = tables.attribution_table(b, c, cases, confidence, min_share)
    functions, flames = profiles.compare(b, c, att, cases)
    return Report(b, c, cases, thr, tables.phase_table(b, c, cases), att, disp,
                  pd.DataFrame(gate_rows), gate_mod.verdict(gate_rows, family_rows), threshold, min_runs,
                  environment_table(b, c), input_kind, hw if cross_machine else [], confidence, list(notes or []),
                  functions, flames, family, min_share)


def robustness(gate_rows: list[dict], b: Side, c: Side, cases: list[str], threshold: float, min_runs: int,
               exceptions, hardware_diff, confidence: float, paired: comparable.PairedBatch | None = None) -> None:
    """Per gate row, in place: the gate again without the runs flagged BUSY or STEAL
    (``without_flagged``: the status then, None where no run of the case was flagged), the same
    way (through the pairs, refitted without them, where the row was). The flagged runs stay
    in the verdict; this says whether it depends on them."""
    def flagged(side, case):
        runs = set(side.values.run[side.values.case == case]) | set(side.failed.run[side.failed.case == case])
        return sorted(r for r in runs if side.run_flags.get(r))

    for row in gate_rows:
        fb, fc = flagged(b, row["case"]), flagged(c, row["case"])
        row["flagged_runs"] = len(fb) + len(fc)
        row["without_flagged"] = None
        if not (fb or fc):
            continue
        kept_b = b.restrict([r for r in b.runs() if r not in fb])
        kept_c = c.restrict([r for r in c.runs() if r not in fc])
        fits = paired.without_runs([kept_b, kept_c]).fits if paired else None
        (again,) = gate_mod.evaluate(kept_b, kept_c, [row["case"]], threshold, min_runs, exceptions,
                                     hardware_diff=hardware_diff, confidence=confidence, block_fits=fits)
        row["without_flagged"] = again["gate"]


VERDICT_ORDER = ("INCOMPLETE", "FAIL", "INCONCLUSIVE", "PASS")


def overall_verdict(verdicts: list[str]) -> str:
    """PASS only when every candidate passes; otherwise the first of INCOMPLETE, FAIL, INCONCLUSIVE."""
    return next(v for v in VERDICT_ORDER if v in verdicts)


@dataclass
class Overview:
    reports: list[Report]
    reference: str
    ledger: pd.DataFrame
    additivity: pd.DataFrame
    history: list[str]  # candidate labels in first-parent order
    verdict: str
    family: FamilyMarks | None = None  # the ledger's changes as one family of questions
    min_share: float = tables.MIN_SHARE


def build_overview(reps: list[Report], reference: str, combines: dict[str, list[str]], history: list[str],
                   sides: list[Side] | None = None, margin_share: float | None = None,
                   margin_ms: float | None = None, min_share: float = tables.MIN_SHARE) -> Overview:
    """``sides``: the candidates as loaded (a report's candidate is restricted to the batches
    it shares with the baseline; the ledger pairs each with the reference itself)."""
    by_label = {c.label: c for c in (sides or [r.candidate for r in reps])}
    ref = by_label[reference]
    others = [c for c in by_label.values() if c.label != reference]
    cases = reps[0].cases
    confidence = reps[0].confidence
    fits = ledger_mod.part_fits([reps[0].baseline, *by_label.values()])
    led, family = ledger_mod.ledger_table(ref, others, cases, confidence, min_share, fits)
    add = ledger_mod.additivity_table(ref, by_label, combines, cases, confidence,
                                      ledger_mod.DEFAULT_MARGIN_SHARE if margin_share is None else margin_share,
                                      margin_ms, fits)
    return Overview(reps, reference, led, add, history, overall_verdict([r.verdict for r in reps]), family,
                    min_share)


@dataclass
class Settings:
    """Everything a report decides with, resolved from the command line and the pins."""
    threshold: float = DEFAULT_THRESHOLD
    min_runs: int = 3
    confidence: float = DEFAULT_CONFIDENCE
    dispersion_limit: float = 0.05
    exceptions: dict = field(default_factory=dict)
    pinned_cases: list[str] | None = None
    input_kind: str = "asv"
    cross_machine: bool = False
    notes: list[str] = field(default_factory=list)  # about how the runs were taken (repeated looks)
    min_share: float = tables.MIN_SHARE
    # several candidates: the ledger's reference, the merges and the first-parent order
    reference: str | None = None
    combines: dict[str, list[str]] = field(default_factory=dict)
    history: list[str] | None = None
    margin_share: float | None = None
    margin_ms: float | None = None


def build_per_hardware(baseline: Side, candidates: list[Side], s: Settings) -> list[tuple]:
    """Never pooled across hardware: one complete comparison per hardware the sides share, each
    (unit, its reports, its overview or None)."""
    built = []
    for unit in comparable.by_hardware(baseline, candidates, s.min_runs):
        paired = comparable.PairedBatch([unit.baseline, *unit.candidates])
        reps = [build(unit.baseline, c, s.threshold, s.min_runs, s.exceptions, s.dispersion_limit, s.pinned_cases,
                      s.input_kind, cross_machine=s.cross_machine, confidence=s.confidence,
                      notes=s.notes + unit.notes, min_share=s.min_share, paired=paired) for c in unit.candidates]
        overview = None
        if len(reps) > 1:
            overview = build_overview(reps, s.reference, s.combines, s.history, unit.candidates, s.margin_share,
                                      s.margin_ms, s.min_share)
        built.append((unit, reps, overview))
    return built
