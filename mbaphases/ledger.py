"""What each optimization bought: every candidate against one reference candidate.

Per case: the throughput ratio candidate / reference (medians), the change in
active ms per vector step split by phase (the attribution of tables.py, so the
parts add up), each change with its distribution-free interval (a change whose
interval contains 0 is not distinguishable from run-to-run noise), and for a
candidate that combines others (pins ``combines``) the additivity test.

Additivity: the interaction = measured change of the combined commit - the sum
of the single optimizations' changes (each against the reference; a change is
the sum of the parts' median changes, as in the ledger). Its interval is a
stratified percentile bootstrap over the runs of every side involved: the
interaction mixes medians of several independent sides, for which no rank
inversion exists. Against an equivalence margin (pins ``[ledger]``: a share of
the combined change, default 10%, or an absolute ``additivity_margin_ms``):
"adds up" only when the whole interval lies inside [-margin, +margin], "does
not add up" when it lies wholly beyond the margin, "undetermined" otherwise,
with the runs per side an interval of this spread would need.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from mbaphases import comparable, tables
from mbaphases.side import Side
from mbaphases.stats import intervals, rules

PHASES = tables.ATTRIBUTION  # the parts of the active time that add up per run
STORY = ("physics", "update_state", "reset_done")  # the phases the demo story is about; the rest is "other"
DEFAULT_MARGIN_SHARE = 0.10


# the ledger's columns -> the part of the active time each is the change of
LEDGER_PARTS = {"delta_sum": "active", "physics": "physics", "update_state": "update_state",
                "reset_done": "reset_done", "other": "other"}
# the parts that are one figure of the entry's (positive: a ratio model applies), by its metric;
# round-robin duet sides are compared on them through every side's pairs (mbaphases.stats.blocks)
BLOCK_METRICS = {"delta_sum": "active_ms", "physics": "physics_ms", "update_state": "update_state_ms",
                 "reset_done": "reset_done_ms"}


def part_fits(sides: list[Side]) -> dict[str, dict]:
    """Per ledger column of BLOCK_METRICS: per case, the intra-block fit of every side's duet runs."""
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
    changes (mbaphases.tables.mark_family). ``fits`` (part_fits): round-robin duet sides' changes
    of the entry's own figures (active time, physics, update_state, reset_done) come from the
    intra-block fit: their point, interval and p-value (the reference's median changed by the
    fitted ratio); "other", a remainder of several figures, keeps its rank interval."""
    rows = []
    for cand in candidates:
        ref, cnd, notes = comparable.pair(reference, cand)
        thr = tables.throughput_table(ref, cnd, cases).set_index("case")
        att = tables.attribution_changes(ref, cnd, cases, confidence).set_index("case")
        for case in cases:
            row = {"candidate": cand.label, "case": case, "ratio": thr.loc[case, "ratio"]}
            a = att.loc[case] if case in att.index else pd.Series(dtype=object)
            row["active_ms_reference"] = a.get("active_ms_baseline")
            for k in ("delta_sum", *PHASES):
                row[f"{k}_ms"] = a.get(f"{k}_ms")
            total = row["delta_sum_ms"]
            # what the three phases the demo story is about leave of the change (a phase not reported: 0)
            row["other_ms"] = (None if tables.missing(total) else
                               total - sum(row[f"{p}_ms"] or 0 for p in STORY))
            pr, pc = _ledger_parts(ref, case, cnd), _ledger_parts(cnd, case, ref)
            blocked = _blocked_changes(ref, cnd, case, pr, fits, confidence)
            for key, change in blocked.items():
                row.update({f"{key}_{k}": v for k, v in change.items()})
            row["method"] = "through every side's duet pairs (intra-block t)" if blocked else "rank"
            for key, part in LEDGER_PARTS.items():
                if key in blocked or pr is None or pc is None or pr[part].isna().all() or pc[part].isna().all():
                    continue
                blocks = tables.part_blocks(ref, cnd, pr, pc, part)
                iv = intervals.difference_interval(pr[part].dropna(), pc[part].dropna(), confidence, blocks)
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
                     ledger: pd.DataFrame, cases: list[str], confidence: float = rules.DEFAULT_CONFIDENCE,
                     margin_share: float = DEFAULT_MARGIN_SHARE, margin_ms: float | None = None) -> pd.DataFrame:
    rows = []
    delta = ledger.set_index(["candidate", "case"])["delta_sum_ms"]
    for combined, parts in combines.items():
        if combined not in by_label or any(p not in by_label for p in parts):
            continue
        involved = [reference, by_label[combined], *(by_label[p] for p in parts)]
        for case in cases:
            singles = [delta.get((p, case)) for p in parts]
            measured = delta.get((combined, case))
            per_run = [tables.attribution_parts(s, case) for s in involved]
            row = {"combined": combined, "case": case, "parts": ", ".join(parts)}
            if (tables.missing(measured) or any(tables.missing(x) for x in singles)
                    or any(p is None for p in per_run)):
                rows.append(row)
                continue
            k = len(parts)

            def interaction(drawn, k=k):
                ref, comb, *single = (_sum_of_medians(d) for d in drawn)
                return comb - sum(single) + k * ref - ref

            point, lo, hi = intervals.bootstrap([_groups(s, p) for s, p in zip(involved, per_run)], interaction,
                                               confidence)
            margin = float(margin_ms) if margin_ms is not None else margin_share * abs(float(measured))
            runs = min(len(p) for p in per_run)
            verdict, need = rules.decide_equivalence(point, lo, hi, margin, runs)
            rows.append({**row, "sum_of_parts_ms": float(sum(singles)), "measured_ms": float(measured),
                         "interaction_ms": point, "interaction_lower_ms": lo, "interaction_upper_ms": hi,
                         "margin_ms": margin, "additivity": verdict,
                         "adds_up": {"adds up": True, "does not add up": False}.get(verdict),
                         "runs_needed": need, "method": "stratified percentile bootstrap over runs"})
    return pd.DataFrame(rows)
