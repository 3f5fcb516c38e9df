"""Build every table from two Sides and write report.md, one CSV per table and
summary.json; the same tables print as aligned text."""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from mbaphases import comparable, profiles, tables
from mbaphases import gate as gate_mod
from mbaphases import ledger as ledger_mod
from mbaphases.interval import BOOTSTRAP_RESAMPLES, DEFAULT_CONFIDENCE, DEFAULT_THRESHOLD, FamilyMarks
from mbaphases.load import hardware_differences
from mbaphases.side import Side

SCHEMA = "mbaphases.summary/4"
NOISE_MARK = "≈0"  # a change whose interval contains 0: not distinguishable from run-to-run noise
SMALL_MARK = "small"  # selected, but below the share of the active time that counts (pins [marks])
DEFINITIONS = {
    "run_value": "A run's value for a metric is the entry's per-run figure: throughput is "
                 "collector_active_steps_per_sec; a phase is the mean over the run's recorded vector steps.",
    "side_figure": "A side's figure is the median of its runs, shown with [min, max].",
    "ratio": "ratio = candidate median / baseline median of throughput (env steps/s).",
    "attribution": "Branch-level decomposition of the change in active ms per vector step: per run, active = "
                   "physics + (step_core - physics) + update_state + reset_done + rest of env_step + replay + "
                   "bookkeeping; each part's change is the difference of the two sides' medians, with the "
                   "distribution-free interval of the shift (Hodges-Lehmann of the per-run differences, by batch); "
                   f"a change whose interval contains 0 is marked {NOISE_MARK} (not distinguishable from run-to-run "
                   "noise). A part's share is its change over the sum of the parts' changes, with a stratified "
                   f"percentile bootstrap interval over runs ({BOOTSTRAP_RESAMPLES} resamples, seeded; a ratio of two "
                   "noisy changes has "
                   "no rank interval). It is a decomposition by phase of the whole branch difference, not a measure "
                   "of 'manager overhead'.",
    "comparable": "Runs are compared only on one hardware (machine, CPU model, logical cores, RAM class, GPU): a "
                  "side with runs on several is reported per hardware that the sides share, never pooled. Within a "
                  "hardware, a batch (one `mbaphases run`; plain asv runs: one day) is a block: the sides are "
                  "compared inside the batches both ran in and the batches combined as strata; a batch in which "
                  "only one side ran is left out, and the notes say so.",
    "dispersion": "range % = (max - min) / median; CV = population standard deviation / mean of the per-run "
                  "throughputs. WIDE: range above the dispersion limit within the runs given. DRIFT: the same "
                  "commit measured in several batches (one `mbaphases run` each) whose [min, max] do not overlap "
                  "and whose medians differ by more than the larger within-batch range. TRANSIENT: the median "
                  "per-step active time of the measured window's first third differs by more than 5% from its "
                  "last third's (median over runs; not in steady state: warmup too short, or the episodes had not "
                  "yet reached their resets). Flagged runs: BUSY (other "
                  "processes used > 25% of the CPUs during the run) or STEAL (the hypervisor took > 5%).",
    "interval": "Distribution-free confidence interval of the throughput ratio (Hodges-Lehmann, by inverting "
                "the Mann-Whitney test): sort the m x n ratios c_j / b_i; the k-th smallest to the k-th largest "
                "cover the true ratio with confidence 1 - 2 P(U <= k - 1), U exact below 20 runs a side. At 3 vs 3 "
                "and 90% k = 1: [min c / max b, max c / min b]. estimate = median of the ratios (Hodges-Lehmann). "
                "Smallest detectable change = half the interval's relative width; runs needed = runs per side at "
                "which an interval of this spread, shrinking as 1/sqrt(runs), would clear the threshold. With "
                "several batches: van Elteren's stratified statistic sum_s U_s / (m_s + n_s + 1) inverted the same "
                "way (exact where the counts allow, else normal), so a shift between batches shared by both sides "
                "neither widens nor biases it; one batch is the rule above.",
    "gate": gate_mod.__doc__.strip(),
}
PHASE_LABELS = {"env_step_ms": "env_step", "physics_ms": "physics", "step_core_ms": "step_core",
                "update_state_ms": "update_state", "reset_done_ms": "reset_done", "replay_ms": "replay",
                "bookkeeping_ms": "bookkeeping", "resets_per_step": "resets/step"}


def generated_at() -> str:
    """When the report was made; SOURCE_DATE_EPOCH (the reproducible-builds convention) fixes it,
    so the same stored runs give the same report files byte for byte."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    return (datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)).isoformat()


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
          notes: list[str] | None = None, min_share: float = tables.MIN_SHARE) -> Report:
    # only the batches both sides ran in are compared (mbaphases.comparable)
    b, c, batch_notes = comparable.pair(b, c)
    notes = list(notes or []) + batch_notes
    packages = package_differences(b, c)
    if packages:
        notes.append(packages)
    cases = tables.case_order(b, c, pinned_cases)
    thr = tables.throughput_table(b, c, cases)
    disp = tables.dispersion_table(b, c, cases, dispersion_limit)
    hw = hardware_differences(b, c)
    gate_rows = gate_mod.evaluate(b, c, cases, threshold, min_runs, exceptions or {},
                                  hardware_diff=None if cross_machine else hw, confidence=confidence)
    robustness(gate_rows, b, c, cases, threshold, min_runs, exceptions or {},
               None if cross_machine else hw, confidence)
    att, family = tables.attribution_table(b, c, cases, confidence, min_share)
    functions, flames = profiles.compare(b, c, att, cases)
    return Report(b, c, cases, thr, tables.phase_table(b, c, cases), att, disp,
                  pd.DataFrame(gate_rows), gate_mod.verdict(gate_rows), threshold, min_runs,
                  environment_table(b, c), input_kind, hw if cross_machine else [], confidence, list(notes or []),
                  functions, flames, family, min_share)


def robustness(gate_rows: list[dict], b: Side, c: Side, cases: list[str], threshold: float, min_runs: int,
               exceptions, hardware_diff, confidence: float) -> None:
    """Per gate row, in place: the gate again without the runs flagged BUSY or STEAL
    (``without_flagged``: the status then, None where no run of the case was flagged). The
    flagged runs stay in the verdict; this says whether it depends on them."""
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
        (again,) = gate_mod.evaluate(kept_b, kept_c, [row["case"]], threshold, min_runs, exceptions,
                                     hardware_diff=hardware_diff, confidence=confidence)
        row["without_flagged"] = again["gate"]


# --- formatting ---------------------------------------------------------------------------------

def _num(x, fmt="{:,.0f}") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return fmt.format(x)


def _md(df: pd.DataFrame) -> str:
    """A GitHub table (pandas through tabulate); cells are the view tables' strings."""
    if not len(df.columns):
        return ""
    return df.astype(str).to_markdown(index=False, disable_numparse=True)


def interval_text(r: dict) -> str:
    if tables.missing(r.get("lower")):
        return "n/a"
    how = f"k={int(r['k'])}" if not tables.missing(r.get("k")) else f"{int(r.get('strata') or 1)} batches"
    return f"[{r['lower']:.3f}, {r['upper']:.3f}] ({how}, {r['coverage']:.1%})"


NOISE = NOISE_MARK  # marks a change whose interval contains 0: not distinguishable from run-to-run noise


def change_text(x, lower, upper, clear, fmt="{:+.2f}", small=False) -> str:
    """'+0.36 [+0.12, +0.60]' for a mark of its family; with the noise mark otherwise, or the size
    mark for a selected change too small to count."""
    if tables.missing(x):
        return "n/a"
    mark = "" if clear else f" {SMALL_MARK}" if small is True else f" {NOISE}"
    if tables.missing(lower):
        return f"{_num(x, fmt)}{mark}"
    return f"{_num(x, fmt)} [{_num(lower, fmt)}, {_num(upper, fmt)}]" + mark


def robustness_text(row: dict) -> str:
    """The gate row's verdict without its flagged runs: 'same' or what it would be."""
    if not row.get("without_flagged"):
        return ""
    n = int(row.get("flagged_runs") or 0)
    same = row["without_flagged"] == row["gate"]
    return f"{'same' if same else row['without_flagged']} ({n} flagged run{'s' if n != 1 else ''} left out)"


def family_text(marks: FamilyMarks | None, min_share: float, what: str, confidence: float) -> str:
    """What a reader needs to weigh a table's marks: its family, how it is controlled, what
    chance alone would give."""
    if marks is None or not marks.size:
        return ""
    return (f"Family: {what}, {marks.size} changes. A mark (a change shown with no sign after it) is "
            f"selected by Benjamini-Hochberg over the whole family at a false discovery rate of "
            f"{marks.error:.0%} (two-sided t p-values of the per-run values: Welch's in one batch, with a "
            f"level per batch in several), has its interval excluding "
            f"0, and is at least {min_share:.0%} of the baseline's active time (pins [marks] min_share): "
            f"{sum(1 for x in marks.selected if x)} selected. The intervals are the marginal {confidence:.0%} "
            f"distribution-free ones; if nothing had moved, about {marks.chance_marks:.1f} of the "
            f"{marks.size} would exclude 0 by chance alone. {NOISE_MARK}: not a mark (not distinguishable "
            f"from run-to-run noise in this family); {SMALL_MARK}: selected but below {min_share:.0%} of the "
            "active time.")


def share_text(x, lower, upper) -> str:
    if tables.missing(x):
        return "n/a"
    if tables.missing(lower):
        return _num(x, "{:.0%}")
    return f"{_num(x, '{:.0%}')} [{_num(lower, '{:.0%}')}, {_num(upper, '{:.0%}')}]"


def view_tables(rep: Report) -> dict[str, pd.DataFrame]:
    """The human-readable tables (strings), in the seed's style."""
    t = rep.throughput
    thr = pd.DataFrame({
        "case": t.case,
        rep.baseline.label: [f"{_num(m)} [{_num(lo)}, {_num(hi)}]" for m, lo, hi in zip(t.baseline_median, t.baseline_min, t.baseline_max)],
        rep.candidate.label: [f"{_num(m)} [{_num(lo)}, {_num(hi)}]"
                              for m, lo, hi in zip(t.candidate_median, t.candidate_min, t.candidate_max)],
        "ratio (median)": [_num(r, "{:.3f}") for r in t.ratio],
        "runs": [f"{nb} / {nc}" for nb, nc in zip(t.baseline_runs, t.candidate_runs)],
    })
    p = rep.phases
    ph = pd.DataFrame({"case": p.case})
    for key, label in PHASE_LABELS.items():
        fmt = "{:.2f}"
        ph[label] = [f"{_num(x, fmt)} → {_num(y, fmt)}" for x, y in zip(p[f"{key}_baseline"], p[f"{key}_candidate"])]
    a = rep.attribution
    at = pd.DataFrame({"case": a.case})
    if "delta_sum_ms" in a:
        recs = a.to_dict("records")
        at["Δ active ms (sum of parts) [interval]"] = [
            change_text(r.get("delta_sum_ms"), r.get("delta_active_lower_ms"), r.get("delta_active_upper_ms"),
                        r.get("delta_active_clear"), small=r.get("delta_active_small")) for r in recs]
        at["Δ median active ms"] = [_num(x, "{:+.2f}") for x in a.delta_active_median_ms]
        for k in tables.ATTRIBUTION:
            at[k] = [change_text(r.get(f"{k}_ms"), r.get(f"{k}_lower_ms"), r.get(f"{k}_upper_ms"), r.get(f"{k}_clear"),
                                 small=r.get(f"{k}_small"))
                     + f"; share {share_text(r.get(f'{k}_share'), r.get(f'{k}_share_lower'), r.get(f'{k}_share_upper'))}"
                     for r in recs]
    d = rep.dispersion
    flags = []
    for w, dr, tr in zip(d.get("wide", [False] * len(d)), d.get("drift", [False] * len(d)),
                         d.get("transient", [False] * len(d))):
        flags.append(" ".join(f for f, on in (("WIDE", w is True), ("DRIFT", dr is True), ("TRANSIENT", tr is True))
                              if on))
    di = pd.DataFrame({
        "case": d.case, "side": d.side, "n": d.n,
        "median": [_num(x) for x in d.get("median", [None] * len(d))],
        "range %": [_num(x, "{:.1%}") for x in d.get("range_pct", [None] * len(d))],
        "CV": [_num(x, "{:.1%}") for x in d.get("cv", [None] * len(d))],
        "flag": flags,
        "first/last third": [_num(x, "{:.3f}") for x in d.get("first_last", [None] * len(d))],
        "flagged runs": [x if isinstance(x, str) else "" for x in d.get("flagged_runs", [""] * len(d))],
        "batches": [x if isinstance(x, str) else "" for x in d.get("batches", [""] * len(d))],
    })
    g = rep.gate
    ga = pd.DataFrame({
        "case": g.case, "gate": g.gate, "threshold": [f"{x:.2f}" for x in g.threshold],
        f"{rep.confidence:.0%} interval of the ratio": [interval_text(r) for r in g.to_dict("records")],
        "estimate (HL)": [_num(x, "{:.3f}") for x in g.estimate],
        "smallest detectable change": [_num(x, "{:.1%}") for x in g.smallest_detectable_change],
        "runs needed": [_num(x, "{:.0f}") if not tables.missing(x) else "" for x in g.runs_needed],
        "p (rank test)": [_num(x, "{:.3f}") if x is not None else "—" for x in g.p_value],
        "without flagged runs": [robustness_text(r) for r in g.to_dict("records")],
        "note": g.note,
    })
    e = rep.environment
    env = pd.DataFrame({"": ["≠" if x else "" for x in e.differs], "key": e.key,
                        rep.baseline.label: e.baseline.astype(str), rep.candidate.label: e.candidate.astype(str)}) if len(e) else e
    f = rep.functions
    fn = pd.DataFrame({
        "case": f.case, "phase": f.phase, "#": f["rank"],
        # C++ template frames run to hundreds of characters; the CSV keeps them whole
        "function": [x if len(x) <= 90 else x[:87] + "..." for x in f.function],
        "Δ total ms": [_num(x, "{:+.3f}") for x in f.delta_total_ms],
        "Δ self ms": [_num(x, "{:+.3f}") for x in f.delta_self_ms],
        "share of the phase's change": [_num(x, "{:.0%}") for x in f.share_of_phase_change],
        "total ms (baseline → candidate)": [f"{_num(x, '{:.3f}')} → {_num(y, '{:.3f}')}"
                                            for x, y in zip(f.total_baseline_ms, f.total_candidate_ms)],
    }) if len(f) else pd.DataFrame()
    return {"gate": ga, "throughput": thr, "phases": ph, "attribution": at, "dispersion": di, "environment": env,
            "functions": fn}


def family_summary(marks: FamilyMarks | None, min_share: float) -> dict | None:
    if marks is None:
        return None
    return {"changes": marks.size, "selected": sum(1 for x in marks.selected if x),
            "false_discovery_rate": marks.error, "chance_marks_unadjusted": marks.chance_marks,
            "min_share": min_share, "method": ("Benjamini-Hochberg over t p-values of the per-run values (Welch in one batch; a level "
                       "per batch in several)")}


def summary(rep: Report) -> dict:
    def side_stats(prefix, row):
        return {"runs": int(row[f"{prefix}_runs"]), "median": row[f"{prefix}_median"],
                "min": row[f"{prefix}_min"], "max": row[f"{prefix}_max"]}

    cases = []
    for case in rep.cases:
        t = rep.throughput[rep.throughput.case == case].iloc[0]
        p = rep.phases[rep.phases.case == case].iloc[0]
        a = rep.attribution[rep.attribution.case == case].iloc[0]
        g = rep.gate[rep.gate.case == case].iloc[0]
        d = rep.dispersion[rep.dispersion.case == case].set_index("side")
        cases.append({
            "case": case,
            "throughput": {"baseline": side_stats("baseline", t), "candidate": side_stats("candidate", t),
                           "ratio": t.ratio},
            "phases_ms": {PHASE_LABELS[k]: {"baseline": p[f"{k}_baseline"], "candidate": p[f"{k}_candidate"]}
                          for k in PHASE_LABELS},
            "attribution_ms": {k: a.get(f"{k}_ms") for k in tables.ATTRIBUTION} | {
                "delta_sum": a.get("delta_sum_ms"), "delta_active_median": a.get("delta_active_median_ms")},
            "attribution": {k: {"delta_ms": a.get("delta_sum_ms" if k == "active" else f"{k}_ms"),
                                "lower_ms": a.get(f"{'delta_active' if k == 'active' else k}_lower_ms"),
                                "upper_ms": a.get(f"{'delta_active' if k == 'active' else k}_upper_ms"),
                                "distinguishable": a.get(f"{'delta_active' if k == 'active' else k}_clear"),
                                "small": a.get(f"{'delta_active' if k == 'active' else k}_small"),
                                "excludes_0": a.get(f"{'delta_active' if k == 'active' else k}_excludes_0"),
                                "p": a.get(f"{'delta_active' if k == 'active' else k}_p"),
                                **({} if k == "active" else {"share": a.get(f"{k}_share"),
                                                             "share_lower": a.get(f"{k}_share_lower"),
                                                             "share_upper": a.get(f"{k}_share_upper")})}
                            for k in ("active", *tables.ATTRIBUTION)},
            "dispersion": {s: {k: d.loc[s].get(k) for k in ("n", "range_pct", "cv", "wide", "drift", "batches",
                                                            "first_last", "transient", "flagged_runs")}
                           for s in d.index},
            "gate": g.gate,
            "gate_detail": {k: g.get(k) for k in ("threshold", "confidence", "lower", "upper", "estimate", "k",
                                                  "coverage", "strata", "method", "smallest_detectable_change",
                                                  "runs_needed", "p_value", "note", "decision",
                                                  "flagged_runs", "without_flagged")},
        })
    env = rep.environment
    return {
        "schema": SCHEMA,
        "generated_at": generated_at(),
        "input": rep.input_kind,
        "baseline": {"label": rep.baseline.label, "revision": rep.baseline.revision, "sources": rep.baseline.sources,
                     "notes": rep.baseline.notes},
        "candidate": {"label": rep.candidate.label, "revision": rep.candidate.revision, "sources": rep.candidate.sources,
                      "notes": rep.candidate.notes},
        "threshold": rep.threshold,
        "confidence": rep.confidence,
        "min_runs": rep.min_runs,
        "cross_machine": rep.cross_machine,
        "notes": rep.notes,
        "attribution_family": family_summary(rep.family, rep.min_share),
        "candidates": [{"label": rep.candidate.label, "revision": rep.candidate.revision, "verdict": rep.verdict}],
        "ledger": None,
        "verdict": rep.verdict,
        "counts": rep.gate.gate.value_counts().to_dict(),
        "cases": cases,
        "functions": rep.functions.to_dict("records"),
        "environment": {"differences": env.loc[env.differs, "key"].tolist() if len(env) else [],
                        "baseline": dict(zip(env.key, env.baseline)) if len(env) else {},
                        "candidate": dict(zip(env.key, env.candidate)) if len(env) else {}},
        "definitions": DEFINITIONS,
    }


def _clean(x):
    """JSON-safe: numpy scalars to Python, NaN to null."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def decision_block(rep: Report) -> str:
    """The proposed gate, what misses it, what noise or drift leaves undecided with the
    suggested handling, recorded decisions, and an exceptions snippet to paste."""
    g = rep.gate.to_dict("records")
    d = rep.dispersion
    lines = [f"Proposed gate: candidate throughput >= {rep.threshold:.2f} x baseline on every case, decided on "
             f"the {rep.confidence:.0%} distribution-free interval of the ratio (verdict now: **{rep.verdict}**)."]
    below = [r for r in g if r["gate"] == "FAIL"]
    if below:
        lines.append("Cases below the gate: " + "; ".join(f"`{r['case']}` {interval_text(r)}" for r in below) + ".")
    undecided = [r for r in g if r["gate"] == "INCONCLUSIVE"]
    for r in undecided:
        more = f"about {int(r['runs_needed'])} runs per side" if r.get("runs_needed") else "more runs"
        lines.append(f"- `{r['case']}`: INCONCLUSIVE, {interval_text(r)} contains {r['threshold']:.2f}; smallest "
                     f"detectable change {_num(r['smallest_detectable_change'], '{:.1%}')}. Suggested: {more} "
                     "(`mbaphases run --until-decisive`), or an exception below.")
    for _, row in d[d.get("drift", pd.Series(False, index=d.index)) == True].iterrows():  # noqa: E712
        lines.append(f"- `{row.case}` ({row.side}): DRIFT between batches ({row.batches}). Suggested: rerun "
                     "both sides in one interleaved batch, or an exception naming the drift.")
    for _, row in d[d.get("transient", pd.Series(False, index=d.index)) == True].iterrows():  # noqa: E712
        lines.append(f"- `{row.case}` ({row.side}): TRANSIENT: the measured window's first third ran "
                     f"{row.first_last - 1:+.1%} against its last (not in steady state). Suggested: more warmup "
                     "steps in the profile; the gated figure stays the field's (steps over active time).")
    for r in g:
        if r["gate"] in ("MISSING", "MISALIGNED"):
            lines.append(f"- `{r['case']}`: {r['gate']}: {r['note']}.")
    depends = [r for r in g if r.get("without_flagged") and r["without_flagged"] != r["gate"]]
    if depends:
        lines.append("Verdicts that depend on runs flagged BUSY or STEAL (kept in the verdict; without them the "
                     "case would be): " + "; ".join(f"`{r['case']}` {r['gate']} → {r['without_flagged']}"
                                                     for r in depends)
                     + ". Suggested: a replacement round (`mbaphases run --until-decisive` schedules one).")
    decided = [r for r in g if r.get("decision")]
    if decided:
        lines.append("Recorded decisions: " + "; ".join(f"`{r['case']}`: {r['decision']}" for r in decided) + ".")
    if undecided:
        snippet = "\n".join(f'[[exception]]\ncase = "{r["case"]}"\nreason = "..."\nthreshold = '
                            f'{max(0.01, math.floor((r["lower"] or r["threshold"]) * 100) / 100):.2f}\n'
                            'decided_by = "..."\ndecided_on = ' + datetime.now(UTC).strftime("%Y-%m-%d")
                            for r in undecided)
        lines.append("Exceptions to paste into the exceptions file, if the maintainer decides so:\n\n```toml\n"
                     + snippet + "\n```")
    if not below and not undecided and len(lines) == 1:
        lines.append("Nothing is below the gate or undecided.")
    return "\n\n".join(lines)


def markdown(rep: Report) -> str:
    v = view_tables(rep)
    b, c = rep.baseline, rep.candidate
    counts = ", ".join(f"{n} {s}" for s, n in rep.gate.gate.value_counts().items())
    parts = [
        *([f"**Cross-machine comparison, declared intended: {'; '.join(rep.cross_machine)}. Absolute "
           "throughputs from different machines are not comparable; read the ratios with that in mind.**"]
          if rep.cross_machine else []),
        f"# {c.label} vs {b.label}: collector throughput A/B",
        f"**Verdict: {rep.verdict}** (gate: candidate throughput >= {rep.threshold:.2f} x baseline; {counts}).",
        f"Baseline `{b.revision}` ({b.label}); candidate `{c.revision}` ({c.label}); input: {rep.input_kind}.",
        *[f"**Note**: {n}" for n in rep.notes],
        "## Gate", _md(v["gate"]),
        "## Throughput: median [min, max] (env steps/s)", _md(v["throughput"]),
        "## Phases: median ms per vector step (baseline → candidate)", _md(v["phases"]),
        "## Branch-level attribution of the change in active ms per vector step",
        family_text(rep.family, rep.min_share, "this report's attribution (every case and part)", rep.confidence),
        _md(v["attribution"]),
        "## Dispersion of per-run throughput", _md(v["dispersion"]),
        *(["## Functions behind the flagged phases (profiled runs, outside the measured ones)",
           FUNCTIONS_TEXT, _md(v["functions"])] if len(v["functions"]) else []),
        *(["**Run notes**: " + "; ".join(f"{s.label} {n}" for s in (b, c) for n in s.notes)] if b.notes or c.notes else []),
        "## Environment and pinned parameters (≠: differs between the sides)", _md(v["environment"]),
        "## Definitions", "\n".join(f"- **{k}**: {t}" for k, t in DEFINITIONS.items() if k != "gate"),
        "### Gate rule\n" + DEFINITIONS["gate"],
        "## For the maintainer: decision", decision_block(rep),
    ]
    return "\n\n".join(parts) + "\n"


FUNCTIONS_TEXT = ("Per case, for each phase whose change is worth a look (not small, and its interval "
                  "excluding 0, or no interval with these runs; largest first, up to three; where to look, not a "
                  "mark), the functions "
                  "whose time in that phase changed most, in ms per vector "
                  "step: each side's share of the phase's samples in its one profiled run (py-spy, outside the "
                  "measured runs) times the phase's measured time (median of its formal runs). Total: the "
                  "function anywhere below the phase function; self: as the leaf. Share: of the phase's measured "
                  "change (a function that replaces another carries more than 100% of it, the replaced one a negative "
                  "share). Flame graphs (red: slower on the candidate) are on the page and under flames/.")


def write(rep: Report, out: Path) -> dict[str, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {"report.md": out / "report.md", "summary.json": out / "summary.json"}
    files["report.md"].write_text(markdown(rep))
    files["summary.json"].write_text(json.dumps(_clean(summary(rep)), indent=2, allow_nan=False) + "\n")
    if rep.flames:
        (out / "flames").mkdir(exist_ok=True)
        for case, svg in rep.flames.items():
            files[f"flames/{case}"] = out / "flames" / f"{slug(case)}.svg"
            files[f"flames/{case}"].write_text(svg)
    for name, df in (("throughput", rep.throughput), ("phases", rep.phases), ("attribution", rep.attribution),
                     ("dispersion", rep.dispersion), ("gate", rep.gate), ("environment", rep.environment),
                     ("functions", rep.functions)):
        files[f"{name}.csv"] = out / f"{name}.csv"
        df.to_csv(files[f"{name}.csv"], index=False)
    return files


def print_tables(rep: Report, stream) -> None:
    v = view_tables(rep)
    if rep.cross_machine:
        print(f"CROSS-MACHINE comparison, declared intended: {'; '.join(rep.cross_machine)}", file=stream)
    print(f"VERDICT: {rep.verdict}  (threshold {rep.threshold:.2f})", file=stream)
    for name in ("gate", "throughput", "phases", "attribution", "dispersion"):
        print(f"\n== {name} ==", file=stream)
        print(v[name].to_string(index=False), file=stream)


# --- one baseline, many candidates ----------------------------------------------------------------

VERDICT_ORDER = ("INCOMPLETE", "FAIL", "INCONCLUSIVE", "PASS")


def slug(label: str) -> str:
    """A candidate's folder name in the report and on the page."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-").lower() or "candidate"


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
    led, family = ledger_mod.ledger_table(ref, others, cases, confidence, min_share)
    add = ledger_mod.additivity_table(ref, by_label, combines, led, cases, confidence,
                                      ledger_mod.DEFAULT_MARGIN_SHARE if margin_share is None else margin_share,
                                      margin_ms)
    return Overview(reps, reference, led, add, history, overall_verdict([r.verdict for r in reps]), family,
                    min_share)


def overview_tables(ov: Overview) -> dict[str, pd.DataFrame]:
    verdicts = pd.DataFrame({
        "candidate": [r.candidate.label for r in ov.reports],
        "revision": [r.candidate.revision[:12] for r in ov.reports],
        "verdict": [r.verdict for r in ov.reports],
        "gate per case": [", ".join(f"{n} {s}" for s, n in r.gate.gate.value_counts().items()) for r in ov.reports],
        "median ratio to baseline (min-max over cases)": [
            f"{_num(r.throughput.ratio.min(), '{:.3f}')}–{_num(r.throughput.ratio.max(), '{:.3f}')}" for r in ov.reports],
    })
    led = ov.ledger
    recs = led.to_dict("records")
    lv = pd.DataFrame({"candidate": led.candidate, "case": led.case,
                       f"ratio to {ov.reference}": [_num(x, "{:.3f}") for x in led.ratio]})
    for key, title in (("delta_sum", "Δ active ms"), ("physics", "Δ physics"), ("update_state", "Δ update_state"),
                       ("reset_done", "Δ reset_done"), ("other", "Δ other")):
        lv[title] = [change_text(r.get(f"{key}_ms"), r.get(f"{key}_lower_ms"), r.get(f"{key}_upper_ms"),
                                 r.get(f"{key}_clear"), "{:+.3f}", r.get(f"{key}_small")) for r in recs]
    a = ov.additivity
    arecs = a.to_dict("records")

    def verdict_text(r):
        v = r.get("additivity")
        if v == "undetermined" and r.get("runs_needed"):
            return f"undetermined (need about {int(r['runs_needed'])} runs per side)"
        return v if isinstance(v, str) else "n/a"

    av = pd.DataFrame({
        "combined": a.get("combined", []), "case": a.get("case", []),
        "sum of single gains (Δ ms)": [_num(r.get("sum_of_parts_ms"), "{:+.3f}") for r in arecs],
        "measured (Δ ms)": [_num(r.get("measured_ms"), "{:+.3f}") for r in arecs],
        f"interaction (ms) [{ov.reports[0].confidence:.0%} interval]": [
            change_text(r.get("interaction_ms"), r.get("interaction_lower_ms"), r.get("interaction_upper_ms"), True,
                        "{:+.3f}") for r in arecs],
        "margin (± ms)": [_num(r.get("margin_ms"), "{:.3f}") for r in arecs],
        "adds up": [verdict_text(r) for r in arecs],
    }) if len(a) else pd.DataFrame()
    return {"verdicts": verdicts, "ledger": lv, "additivity": av}


def overview_markdown(ov: Overview) -> str:
    v = overview_tables(ov)
    b = ov.reports[0].baseline
    parts = [
        f"# {len(ov.reports)} candidates vs {b.label}: collector throughput",
        f"**Verdict: {ov.verdict}** (every candidate must pass; gate: candidate throughput >= "
        f"{ov.reports[0].threshold:.2f} x baseline at {ov.reports[0].confidence:.0%}).",
        f"Baseline `{b.revision}` ({b.label}). One report per candidate in its folder.",
        "## Gate per candidate", _md(v["verdicts"]),
        f"## Ledger: each candidate against {ov.reference}",
        "Change in active ms per vector step (negative: faster), split by phase as in each report's attribution, "
        "each with its distribution-free interval.",
        family_text(ov.family, ov.min_share, "this ledger (every candidate, case and column)",
                    ov.reports[0].confidence),
        _md(v["ledger"]),
    ]
    if len(v["additivity"]):
        parts += ["## Additivity: do the single optimizations add up?",
                  "The interaction is the combined commit's measured change minus the sum of the single "
                  "optimizations' changes (all against the same reference), with a stratified percentile bootstrap "
                  "interval over the runs of every side involved. Adds up: the interval lies inside ± the margin; "
                  "does not add up: it lies wholly beyond it; undetermined otherwise (the runs per side an interval "
                  "of this spread would need).", _md(v["additivity"])]
    parts += ["## History (first-parent order)", " → ".join(ov.history)]
    for r in ov.reports:
        parts += [f"## {r.candidate.label}: decision", decision_block(r)]
    return "\n\n".join(parts) + "\n"


def overview_summary(ov: Overview) -> dict:
    b = ov.reports[0].baseline
    return {
        "schema": SCHEMA,
        "generated_at": generated_at(),
        "input": ov.reports[0].input_kind,
        "baseline": {"label": b.label, "revision": b.revision, "sources": b.sources, "notes": b.notes},
        "threshold": ov.reports[0].threshold,
        "confidence": ov.reports[0].confidence,
        "verdict": ov.verdict,
        "candidates": [{"label": r.candidate.label, "revision": r.candidate.revision, "verdict": r.verdict,
                        "counts": r.gate.gate.value_counts().to_dict(),
                        "summary": f"{slug(r.candidate.label)}/summary.json"} for r in ov.reports],
        "ledger": {"reference": ov.reference, "history": ov.history, "family": family_summary(ov.family, ov.min_share),
                   "rows": ov.ledger.to_dict("records"), "additivity": ov.additivity.to_dict("records")},
        "definitions": DEFINITIONS,
    }


def write_overview(ov: Overview, out: Path) -> dict[str, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {"report.md": out / "report.md", "summary.json": out / "summary.json",
             "ledger.csv": out / "ledger.csv", "additivity.csv": out / "additivity.csv"}
    files["report.md"].write_text(overview_markdown(ov))
    files["summary.json"].write_text(json.dumps(_clean(overview_summary(ov)), indent=2, allow_nan=False) + "\n")
    ov.ledger.to_csv(files["ledger.csv"], index=False)
    ov.additivity.to_csv(files["additivity.csv"], index=False)
    return files


def print_overview(ov: Overview, stream) -> None:
    v = overview_tables(ov)
    print(f"\n######## OVERALL VERDICT: {ov.verdict}", file=stream)
    for name in ("verdicts", "ledger", "additivity"):
        if len(v[name]):
            print(f"\n== {name} ==", file=stream)
            print(v[name].to_string(index=False), file=stream)


# --- runs on several hardwares: one comparison each, never pooled ------------------------------------

def hardware_verdicts(built) -> pd.DataFrame:
    return pd.DataFrame([{"hardware": unit.label, "folder": unit.folder,
                          "verdict": overall_verdict([r.verdict for r in reps]),
                          "candidates": ", ".join(f"{r.candidate.label} {r.verdict}" for r in reps)}
                         for unit, reps, _ in built])


def write_hardware_index(built, out: Path) -> dict[str, Path]:
    """The top of a report whose sides ran on several hardwares: one verdict per hardware,
    each comparison whole in its folder; the overall verdict passes only if every one does."""
    out = Path(out)
    table = hardware_verdicts(built)
    verdict = overall_verdict(list(table.verdict))
    md = "\n\n".join([
        f"# Runs on {len(built)} hardwares: one comparison per hardware, never pooled",
        f"**Verdict: {verdict}** (PASS only if the comparison on every hardware passes). Absolute throughputs "
        "are not comparable across hardware, so each hardware's runs are compared with the same hardware's runs "
        "only; each folder holds that comparison's full report.",
        _md(table),
        *[f"**Note** ({unit.label}): {n}" for unit, _, _ in built for n in unit.notes],
    ]) + "\n"
    files = {"report.md": out / "report.md", "summary.json": out / "summary.json"}
    out.mkdir(parents=True, exist_ok=True)
    files["report.md"].write_text(md)
    doc = {"schema": SCHEMA, "generated_at": generated_at(), "verdict": verdict,
           "hardware": [{"hardware": unit.hardware, "label": unit.label, "folder": unit.folder,
                         "verdict": overall_verdict([r.verdict for r in reps]), "notes": unit.notes,
                         "summary": f"{unit.folder}/summary.json"} for unit, reps, _ in built],
           "definitions": DEFINITIONS}
    files["summary.json"].write_text(json.dumps(_clean(doc), indent=2, allow_nan=False) + "\n")
    return files
