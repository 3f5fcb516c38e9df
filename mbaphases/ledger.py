"""What each optimization bought: every candidate against one reference candidate.

Per case: the throughput ratio candidate / reference (of medians), the change in
active ms per vector step and its parts by phase (the attribution of tables.py),
each change the estimate of its own interval (Hodges-Lehmann of the runs, or the
intra-block fit for round-robin pairs; a change whose interval contains 0 is not
distinguishable from run-to-run noise), and for a candidate that combines others
(pins ``combines``) the additivity test.

Additivity: the interaction = measured change of the combined commit - the sum
of the single optimizations' changes (each against the reference). Where every
side involved ran in pairs, it is a contrast of the active time's intra-block
fit (each change the reference's median times the fitted ratio less 1; the
interval by the delta method), so each pair's shared slot
cancels as in the gate. Otherwise the changes are of the sums of the parts'
medians and the interval a stratified percentile bootstrap over the runs of
every side involved. Against a preset equivalence margin (pins ``[ledger]
additivity_margin``: a share of the reference's active time per case, default
5%, or an absolute ``additivity_margin_ms``): "adds up" only when the whole
interval lies inside [-margin, +margin], "does not add up" when it lies wholly
beyond the margin, "undetermined" otherwise, with the runs per side an interval
of this spread would need. The margin is set before the data, never drawn from
them (a share of the measured change is random, and small where the change is).
The cases together: a random-effects summary row of the interactions as shares
of the reference's active time, against the same share.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from mbaphases import comparable, tables
from mbaphases.side import Side
from mbaphases.stats import blocks, intervals, rules

PHASES = tables.ATTRIBUTION  # the parts of the active time that add up per run
STORY = ("physics", "update_state", "reset_done")  # the phases the demo story is about; the rest is "other"
# the interaction a maintainer calls "adds up": 5% of the reference's active time a step, about the
# smallest change the gate's +-3% target half-width can tell apart from none on a pair of sides
DEFAULT_MARGIN_SHARE = 0.05


# the ledger's columns -> the part of the active time each is the change of
LEDGER_PARTS = {"delta_sum": "active", "physics": "physics", "update_state": "update_state",
                "reset_done": "reset_done", "other": "other"}
# the parts that are one figure of the entry's (positive: a ratio model applies), by its metric;
# round-robin sides are compared on them through every side's pairs (mbaphases.stats.blocks)
BLOCK_METRICS = {"delta_sum": "active_ms", "physics": "physics_ms", "update_state": "update_state_ms",
                 "reset_done": "reset_done_ms"}


def part_fits(sides: list[Side]) -> dict[str, dict]:
    """Per ledger column of BLOCK_METRICS: per case, the intra-block fit of every side's paired runs."""
    return {key: comparable.block_fits(sides, metric) for key, metric in BLOCK_METRICS.items()}


def _ledger_parts(side: Side, case: str, other: Side) -> pd.DataFrame | None:
    parts = tables.attribution_pair(side, other, case)[0]
    if parts is None:
        return None
    rest = [p for p in PHASES if p not in STORY]
    return parts.assign(other=parts[rest].sum(axis=1, min_count=1))


def ledger_table(reference: Side, candidates: list[Side], cases: list[str], confidence: float = rules.DEFAULT_CONFIDENCE,
                 min_share: float = tables.MIN_SHARE, fits: dict[str, dict] | None = None
                 ) -> tuple[pd.DataFrame, intervals.FamilyMarks]:
    """Every candidate against the reference, case by case; the whole ledger is one family of
    changes (mbaphases.tables.mark_family). ``fits`` (part_fits): round-robin sides' changes
    of the entry's own figures (active time, physics, update_state, reset_done) come from the
    intra-block fit: their point, interval and p-value (the reference's median changed by the
    fitted ratio); "other", a remainder of several figures, keeps its rank interval."""
    rows = []
    for cand in candidates:
        ref, cnd, notes = comparable.pair(reference, cand)
        thr = tables.throughput_table(ref, cnd, cases).set_index("case")
        att = tables.attribution_changes(ref, cnd, cases, confidence).set_index("case")
        for case in cases:
            row = {"candidate": cand.label, "case": case, "ratio": thr.loc[case, "ratio"], "confidence": confidence}
            a = att.loc[case] if case in att.index else pd.Series(dtype=object)
            row["active_ms_reference"] = a.get("active_ms_baseline")
            # the active time's own change; the sum of the parts' median changes is what additivity adds up
            row["delta_sum_ms"] = a.get("delta_active_ms")
            row["sum_of_median_changes_ms"] = a.get("delta_sum_ms")
            for k in PHASES:
                row[f"{k}_ms"] = a.get(f"{k}_ms")
            row["other_ms"] = None  # the remainder's own change, where both sides report it (below)
            pr, pc = _ledger_parts(ref, case, cnd), _ledger_parts(cnd, case, ref)
            blocked = _blocked_changes(ref, cnd, case, pr, fits, confidence)
            for key, change in blocked.items():
                row.update({f"{key}_{k}": v for k, v in change.items()})
            row["method"] = "through every side's pairs (intra-block t)" if blocked else "rank"
            for key, part in LEDGER_PARTS.items():
                if key in blocked or pr is None or pc is None or pr[part].isna().all() or pc[part].isna().all():
                    continue
                blocks = tables.part_blocks(ref, cnd, pr, pc, part)
                iv = intervals.difference_interval(pr[part].dropna(), pc[part].dropna(), confidence, blocks)
                row[f"{key}_ms"] = iv.estimate  # the interval's own point (Hodges-Lehmann)
                row[f"{key}_lower_ms"], row[f"{key}_upper_ms"] = iv.lower, iv.upper
                row[f"{key}_excludes_0"] = None if iv.lower is None else not iv.contains(0.0)
                row[f"{key}_p"] = intervals.change_p(blocks)
            row["notes"] = "; ".join(notes)
            rows.append(row)
    table = pd.DataFrame(rows)
    marks = tables.mark_family(table, {k: f"{k}_ms" for k in LEDGER_PARTS}, confidence, min_share,
                               scale="active_ms_reference")
    return table, marks


def _blocked_changes(ref: Side, cnd: Side, case: str, parts: pd.DataFrame | None, fits: dict[str, dict] | None,
                     confidence: float) -> dict[str, dict]:
    """Per ledger column with an intra-block fit of this case: the change in ms (the reference's
    median times the fitted ratio less 1), its interval, whether it excludes 0 and its p-value."""
    if not fits or parts is None:
        return {}
    out = {}
    for key in BLOCK_METRICS:
        part = LEDGER_PARTS[key]
        ct = comparable.pair_contrast(fits.get(key, {}).get(case), ref, cnd, confidence)
        if ct is None or parts[part].isna().all():
            continue
        base = float(parts[part].median())
        out[key] = {"ms": base * (ct.estimate - 1), "lower_ms": base * (ct.lower - 1),
                    "upper_ms": base * (ct.upper - 1), "excludes_0": not ct.lower <= 1 <= ct.upper, "p": ct.p}
    return out


def _sum_of_medians(drawn: np.ndarray) -> np.ndarray:
    """Per resample: the sum over parts of the parts' medians over runs (a side's figure whose
    differences are the ledger's changes)."""
    return np.nansum(np.median(drawn, axis=1), axis=1)


def _groups(side: Side, parts: pd.DataFrame) -> list[np.ndarray]:
    """The side's per-run parts, one array per batch (its own batches: strata of the bootstrap)."""
    by_batch = {}
    for run in parts.index:
        by_batch.setdefault(side.batches.get(run), []).append(run)
    return [parts.loc[runs, list(PHASES)].to_numpy() for runs in by_batch.values()]


def additivity_table(reference: Side, by_label: dict[str, Side], combines: dict[str, list[str]],
                     cases: list[str], confidence: float = rules.DEFAULT_CONFIDENCE,
                     margin_share: float = DEFAULT_MARGIN_SHARE, margin_ms: float | None = None,
                     fits: dict[str, dict] | None = None) -> pd.DataFrame:
    """Per combined candidate and case, the interaction and its equivalence test against a margin set
    before the data (``margin_share`` of the reference's median active time in the case, or
    ``margin_ms``); then per combined candidate a pooled row (case "all cases"): the random-effects
    summary of the cases' interactions as shares of the reference's active time (pooled). Where every
    side involved ran in pairs of one batch (``fits``: part_fits), a case's interaction is a contrast
    of the active time's intra-block fit (each pair's slot out, as the gate's); otherwise a stratified
    percentile bootstrap over runs (point: the resamples' median)."""
    rows = []
    for combined, parts in combines.items():
        if combined not in by_label or any(p not in by_label for p in parts):
            continue
        involved = [reference, by_label[combined], *(by_label[p] for p in parts)]
        decided = []
        for case in cases:
            per_run = [tables.attribution_parts(s, case) for s in involved]
            row = {"combined": combined, "case": case, "parts": ", ".join(parts)}
            if any(p is None or p["active"].isna().all() for p in per_run):
                rows.append(row)
                continue
            runs = min(len(p) for p in per_run)
            found = (_fitted_interaction(involved, per_run[0], (fits or {}).get("delta_sum", {}).get(case), confidence)
                     or _bootstrap_interaction(involved, per_run, confidence))
            active = float(per_run[0]["active"].median())
            margin = float(margin_ms) if margin_ms is not None else margin_share * active
            verdict, need = rules.decide_equivalence(found["interaction_ms"], found["interaction_lower_ms"],
                                                     found["interaction_upper_ms"], margin, runs)
            rows.append({**row, **found, "active_ms_reference": active, "margin_ms": margin, "additivity": verdict,
                         "adds_up": {"adds up": True, "does not add up": False}.get(verdict), "runs_needed": need,
                         "confidence": confidence})
            decided.append((rows[-1], runs))
        pooled = _pooled_interaction(decided, confidence, margin_share if margin_ms is None else None)
        if pooled is not None:
            rows.append({"combined": combined, "case": POOLED, "parts": ", ".join(parts), **pooled})
    return pd.DataFrame(rows)


POOLED = "all cases (pooled)"


def _pooled_interaction(rows: list[tuple[dict, int]], confidence: float, margin_share: float | None) -> dict | None:
    """The cases' interactions as shares of the reference's active time, summarised by a random-effects
    model (statsmodels' combine_effects, Paule-Mandel's spread between cases): its mean with the wider
    of the t interval on k - 1 df and Hartung-Knapp-Sidik-Jonkman's (the modification that keeps
    HKSJ from narrowing where the cases agree more than their errors say), tested against the share
    margin. Each case's standard error is its interval's half-width over its quantile. A case's runs
    are the same processes as the others' (a run's slowdown reaches all its cases): the spread between
    cases takes that in, the model does not model it. None with fewer than three cases with an
    interval, or with an absolute margin in ms (no one share)."""
    usable = [(r, n) for r, n in rows if r.get("interaction_lower_ms") is not None
              and np.isfinite(r["interaction_lower_ms"]) and r["active_ms_reference"] > 0]
    if margin_share is None or len(usable) < 3:
        return None
    effect, ses = [], []
    for r, _ in usable:
        q = intervals.quantile(confidence, r.get("df"))
        effect.append(r["interaction_ms"] / r["active_ms_reference"])
        ses.append((r["interaction_upper_ms"] - r["interaction_lower_ms"]) / 2 / q / r["active_ms_reference"])
    found = intervals.pooled(effect, ses, confidence)
    mean, lower, upper, k = found.mean, found.lower, found.upper, found.cases
    verdict, need = rules.decide_equivalence(mean, lower, upper, margin_share, min(n for _, n in usable))
    return {"interaction_share": mean, "interaction_share_lower": lower, "interaction_share_upper": upper,
            "between_cases_sd": found.between_sd, "cases": k, "margin_share": margin_share,
            "additivity": verdict, "adds_up": {"adds up": True, "does not add up": False}.get(verdict),
            "runs_needed": need, "confidence": confidence,
            "method": f"random effects over {k} cases (Paule-Mandel; the wider of t and HKSJ on {k - 1} df)"}


def _fitted_interaction(involved: list[Side], reference_parts: pd.DataFrame, fit, confidence: float) -> dict | None:
    """The interaction through the active time's intra-block fit, where every side involved ran all
    its runs in pairs (None otherwise)."""
    if fit is None or not all(comparable.all_paired(s) for s in involved):
        return None
    reference, combined, *singles = (s.revision for s in involved)
    found = blocks.interaction(fit, reference, combined, singles, float(reference_parts["active"].median()),
                               confidence)
    if found is None:
        return None
    return {"sum_of_parts_ms": found.sum_of_parts, "measured_ms": found.measured, "interaction_ms": found.estimate,
            "interaction_lower_ms": found.lower, "interaction_upper_ms": found.upper, "df": found.df,
            "method": f"intra-block fit of the active time (t on {found.df:.0f} df)"}


def _bootstrap_interaction(involved: list[Side], per_run: list[pd.DataFrame], confidence: float) -> dict:
    """The interaction of the sides' sums of part medians, by a stratified percentile bootstrap."""
    k = len(involved) - 2

    def interaction(drawn):
        ref, comb, *single = (_sum_of_medians(d) for d in drawn)
        return comb - sum(single) + k * ref - ref

    point, lo, hi = intervals.bootstrap([_groups(s, p) for s, p in zip(involved, per_run)], interaction, confidence)
    sums = [float(np.nansum(p[list(PHASES)].median())) for p in per_run]
    return {"sum_of_parts_ms": sum(x - sums[0] for x in sums[2:]), "measured_ms": sums[1] - sums[0],
            "interaction_ms": point, "interaction_lower_ms": lo, "interaction_upper_ms": hi, "df": None,
            "method": "stratified percentile bootstrap over runs (point: the resamples' median)"}
