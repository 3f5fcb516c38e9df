"""The maintainer's tables, derived from two Sides with pandas.

Definitions (also printed in the report):
* a run's value for a metric is the entry's per-run figure (throughput:
  collector_active_steps_per_sec; phases: the mean over the run's recorded steps);
* a side's figure is the median of its runs, with [min, max];
* ratio = candidate median / baseline median;
* range % = (max - min) / median; CV = population std / mean of the per-run values;
* every change comes with its interval (mbaphases.stats: the one home of the statistics).
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import pandas as pd

from mbaphases import comparable
from mbaphases.side import Side
from mbaphases.stats import intervals, rules

PHASES = ("env_step_ms", "physics_ms", "step_core_ms", "update_state_ms", "reset_done_ms", "replay_ms",
          "bookkeeping_ms", "resets_per_step")
# the branch-level gap in active ms per vector step, split so the parts add up per run
ATTRIBUTION = ("physics", "step_core_minus_physics", "update_state", "reset_done", "env_step_rest", "replay",
               "bookkeeping")


def missing(x) -> bool:
    """No value: None, or NaN (a figure a side did not report, or a table's empty cell)."""
    return x is None or (isinstance(x, numbers.Real) and math.isnan(x))


def case_order(baseline: Side, candidate: Side, pinned: list[str] | None = None) -> list[str]:
    seen = list(pinned or [])
    for side in (baseline, candidate):
        for c in list(side.values.case.unique()) + list(side.failed.case.unique()) + list(side.alignment):
            if c not in seen:
                seen.append(c)
    return seen


def per_run(side: Side, metric: str, case: str) -> np.ndarray:
    v = side.values
    return v.loc[(v.case == case) & (v.metric == metric), "value"].to_numpy(dtype=float)


def per_run_map(side: Side, metric: str, case: str) -> dict[str, float]:
    """run -> value (runs that did not report the metric left out)."""
    v = side.values
    x = v[(v.case == case) & (v.metric == metric)]
    return {r: float(val) for r, val in zip(x.run, x.value) if val == val}


def _summary(x: np.ndarray) -> dict:
    x = x[~np.isnan(x)]
    if len(x) == 0:
        return {"runs": 0, "median": None, "min": None, "max": None}
    return {"runs": int(len(x)), "median": float(np.median(x)), "min": float(x.min()), "max": float(x.max())}


def throughput_table(b: Side, c: Side, cases: list[str]) -> pd.DataFrame:
    rows = []
    for case in cases:
        sb, sc = _summary(per_run(b, "throughput", case)), _summary(per_run(c, "throughput", case))
        ratio = sc["median"] / sb["median"] if sb["median"] and sc["median"] is not None else None
        rows.append({"case": case, "baseline_median": sb["median"], "baseline_min": sb["min"], "baseline_max": sb["max"],
                     "baseline_runs": sb["runs"], "candidate_median": sc["median"], "candidate_min": sc["min"],
                     "candidate_max": sc["max"], "candidate_runs": sc["runs"],
                     "ratio": None if ratio is None else round(ratio, 3)})
    return pd.DataFrame(rows)


def phase_table(b: Side, c: Side, cases: list[str]) -> pd.DataFrame:
    rows = []
    for case in cases:
        row = {"case": case}
        for ph in PHASES:
            for name, side in (("baseline", b), ("candidate", c)):
                x = per_run(side, ph, case)
                x = x[~np.isnan(x)]
                row[f"{ph}_{name}"] = float(np.median(x)) if len(x) else None
        rows.append(row)
    return pd.DataFrame(rows)


def attribution_parts(side: Side, case: str) -> pd.DataFrame | None:
    """Per run (rows), the parts of the active ms per vector step; they add up in every run."""
    v = side.values[side.values.case == case]
    if v.empty:
        return None
    w = v.pivot_table(index="run", columns="metric", values="value", aggfunc="first", dropna=False)
    need = ("env_step_ms", "step_core_ms", "update_state_ms", "reset_done_ms", "replay_ms", "bookkeeping_ms")
    if any(k not in w or w[k].isna().all() for k in need):
        return None
    physics = w["physics_ms"] if "physics_ms" in w and not w["physics_ms"].isna().any() else None
    parts = pd.DataFrame({
        "physics": physics if physics is not None else np.nan,
        "step_core_minus_physics": w["step_core_ms"] - (physics if physics is not None else 0.0),
        "update_state": w["update_state_ms"],
        "reset_done": w["reset_done_ms"],
        "env_step_rest": w["env_step_ms"] - w["step_core_ms"] - w["update_state_ms"] - w["reset_done_ms"],
        "replay": w["replay_ms"],
        "bookkeeping": w["bookkeeping_ms"],
    })
    parts["active"] = w["active_ms"] if "active_ms" in w else parts.sum(axis=1, min_count=1)
    return parts


def attribution_pair(b: Side, c: Side, case: str) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """Both sides' parts split the same way: where one side reports no physics time of its own
    (e.g. an older backend), physics stays inside step_core on both, so no part compares a whole
    with a remainder."""
    pb, pc = attribution_parts(b, case), attribution_parts(c, case)
    if pb is None or pc is None or pb["physics"].isna().all() == pc["physics"].isna().all():
        return pb, pc
    merged = []
    for parts in (pb, pc):
        parts = parts.copy()
        parts["step_core_minus_physics"] = parts["step_core_minus_physics"] + parts["physics"].fillna(0.0)
        parts["physics"] = np.nan
        merged.append(parts)
    return merged[0], merged[1]


def part_blocks(b: Side, c: Side, pb: pd.DataFrame, pc: pd.DataFrame, part: str) -> list[tuple]:
    """Per batch both ran in: the part's per-run values of each side (runs not reporting it left out)."""
    xb, xc = pb[part].dropna(), pc[part].dropna()
    return [(xb[rb].to_numpy(), xc[rc].to_numpy()) for rb, rc in comparable.block_runs(b, c, xb.index, xc.index)]


def _shares(b: Side, c: Side, pb: pd.DataFrame, pc: pd.DataFrame, confidence: float) -> list[tuple]:
    """Each part's share of the change, with a bootstrap interval: (point, lower, upper) per part of
    ATTRIBUTION, the point the resamples' median. Runs in pairs: whole pairs are drawn and a part's
    change is the mean of its per-pair differences (so the shares add up to one); otherwise each
    batch's runs are drawn, each side alone, and a change is the difference of medians."""
    cols = list(ATTRIBUTION)
    blocks = comparable.block_runs(b, c, pb.index, pc.index)
    pairs = [(rb[0], rc[0]) for rb, rc in blocks if len(rb) == 1 and len(rc) == 1]
    if len(pairs) >= comparable.MIN_PAIRS:
        def paired_share(drawn):
            with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a part no run reports: no share
                delta = np.nanmean(drawn[1] - drawn[0], axis=1)
                return delta / np.nansum(delta, axis=1, keepdims=True)
        return intervals.bootstrap_pairs(pb.loc[[r for r, _ in pairs], cols].to_numpy(),
                                         pc.loc[[r for _, r in pairs], cols].to_numpy(), paired_share, confidence)
    groups = [[pb.loc[rb, cols].to_numpy() for rb, _ in blocks], [pc.loc[rc, cols].to_numpy() for _, rc in blocks]]

    def share(drawn):
        delta = np.median(drawn[1], axis=1) - np.median(drawn[0], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):  # no change at all: no share
            return delta / np.nansum(delta, axis=1, keepdims=True)

    return intervals.bootstrap_many(groups, share, confidence)


# a change below this share of the baseline's active time is not marked, whatever its interval
# (pins [marks] min_share): a structural shift of a microsecond is clear and irrelevant
MIN_SHARE = 0.01


def attribution_changes(b: Side, c: Side, cases: list[str], confidence: float = rules.DEFAULT_CONFIDENCE) -> pd.DataFrame:
    """Per case and part: the change in ms with its distribution-free interval (``{k}_ms``: the
    Hodges-Lehmann estimate of the per-run differences, stratified by batch, the interval's own point;
    ``{k}_lower_ms``, ``{k}_upper_ms``, ``{k}_excludes_0``), the change of the sides' medians
    (``{k}_median_ms``, a table of medians' figure), the p-value of no change for the family's marks
    (``{k}_p``, :func:`intervals.change_p`), and the part's share of the change with its bootstrap
    interval. ``delta_active``: the active time's own change; ``delta_sum_ms``: the sum of the parts'
    median changes (where additivity is judged). The marks a reader acts on come from
    :func:`mark_family` over the whole family."""
    rows = []
    for case in cases:
        pb, pc = attribution_pair(b, c, case)
        row = {"case": case}
        if pb is None or pc is None:
            rows.append(row)
            continue
        cb = {k: float(x) for k, x in pb.median().items()}
        cc = {k: float(x) for k, x in pc.median().items()}
        deltas = {k: cc[k] - cb[k] for k in ATTRIBUTION}
        row["active_ms_baseline"], row["active_ms_candidate"] = cb["active"], cc["active"]
        row["delta_active_median_ms"] = cc["active"] - cb["active"]
        row["delta_sum_ms"] = sum(d for d in deltas.values() if not math.isnan(d))
        row.update({f"{k}_ms": None for k in ("delta_active", *ATTRIBUTION)})  # a part no side reports
        for k, part in (("delta_active", "active"), *((k, k) for k in ATTRIBUTION)):
            if pb[part].isna().all() or pc[part].isna().all():
                continue
            blocks = part_blocks(b, c, pb, pc, part)
            iv = intervals.difference_interval(pb[part].dropna(), pc[part].dropna(), confidence, blocks)
            row[f"{k}_ms"] = iv.estimate
            row[f"{k}_lower_ms"], row[f"{k}_upper_ms"] = iv.lower, iv.upper
            row[f"{k}_excludes_0"] = None if iv.lower is None else not iv.contains(0.0)
            row[f"{k}_p"] = intervals.change_p(blocks)
        shares = _shares(b, c, pb, pc, confidence)
        for k, (point, lo, hi) in zip(ATTRIBUTION, shares):
            d = deltas[k]
            row[f"{k}_median_ms"] = None if math.isnan(d) else d
            row[f"{k}_share"], row[f"{k}_share_lower"], row[f"{k}_share_upper"] = (
                (None, None, None) if math.isnan(d) else (point, lo, hi))
        rows.append(row)
    return pd.DataFrame(rows)


def mark_family(table: pd.DataFrame, keys: dict[str, str], confidence: float, min_share: float = MIN_SHARE,
                scale: str = "active_ms_baseline") -> intervals.FamilyMarks:
    """Marks one family of changes in place: every ``(row, key)`` with a p-value is one question
    (``keys``: key -> the column of its change in ms), selected as in :class:`intervals.FamilyMarks`.
    ``{key}_clear`` (the mark): selected, its interval excluding 0 where the runs give one, and at
    least ``min_share`` of the row's ``scale``; ``{key}_small``: all of that but the size."""
    questions = [(i, k) for i in table.index for k in keys
                 if f"{k}_p" in table and table.at[i, f"{k}_p"] is not None
                 and table.at[i, f"{k}_p"] == table.at[i, f"{k}_p"]]
    marks = intervals.family_marks([float(table.at[i, f"{k}_p"]) for i, k in questions], confidence)
    for k in keys:
        for col in ("_clear", "_small"):
            table[f"{k}{col}"] = pd.Series([None] * len(table), index=table.index, dtype=object)
    for (i, k), selected in zip(questions, marks.selected):
        change, size = table.at[i, keys[k]], table.at[i, scale] if scale in table else None
        small = bool(size is not None and size == size and change == change and abs(change) < min_share * abs(size))
        excludes = table.at[i, f"{k}_excludes_0"] if f"{k}_excludes_0" in table else None
        table.at[i, f"{k}_small"] = bool(small and selected and excludes is not False)
        table.at[i, f"{k}_clear"] = bool(selected and not small and excludes is not False)
    return marks


def attribution_table(b: Side, c: Side, cases: list[str], confidence: float = rules.DEFAULT_CONFIDENCE,
                      min_share: float = MIN_SHARE) -> tuple[pd.DataFrame, intervals.FamilyMarks]:
    """The attribution of one report, its changes marked as one family (every case and part)."""
    table = attribution_changes(b, c, cases, confidence)
    keys = {"delta_active": "delta_active_ms", **{k: f"{k}_ms" for k in ATTRIBUTION}}
    return table, mark_family(table, keys, confidence, min_share)


def dispersion_table(b: Side, c: Side, cases: list[str], limit: float = 0.05) -> pd.DataFrame:
    """Within-batch spread of per-run throughput (WIDE above ``limit``), the spread inside a run
    (between its 10-step windows, the median over runs) and, where a commit has runs from several
    batches, drift between them (DRIFT): the three levels the variance sits at."""
    rows = []
    for case in cases:
        for name, side in (("baseline", b), ("candidate", c)):
            x = per_run(side, "throughput", case)
            if len(x) == 0:
                rows.append({"case": case, "side": name, "n": 0})
                continue
            med, rng, cv = rules.spread(x)
            drift, batches = batch_drift(side, case)
            trend = per_run(side, "step_trend", case)
            trend = trend[~np.isnan(trend)]
            first_last = float(np.median(trend)) if len(trend) else None
            within = per_run(side, "window_spread", case)
            within = within[~np.isnan(within)]
            runs = sorted(set(side.values.run[side.values.case == case]))
            flagged = "; ".join(f"{r}: {', '.join(side.run_flags[r])}" for r in runs if side.run_flags.get(r))
            modes = two_modes_text(side, case)
            rows.append({"case": case, "side": name, "n": int(len(x)), "median": med, "range_pct": rng,
                         "cv": cv, "within_run": float(np.median(within)) if len(within) else None,
                         "wide": rules.is_wide(rng, limit), "drift": drift,
                         "batches": batches, "first_last": first_last,
                         "transient": rules.is_transient(first_last),
                         "flagged_runs": flagged, "modes": modes})
    return pd.DataFrame(rows)


def two_modes_text(side: Side, case: str) -> str:
    """The figures of one side and case whose runs fall into two modes (mbaphases.stats.rules.two_modes),
    each mode's median and its runs: which runs ran in which state, instead of one wide interval."""
    parts = []
    for metric in ("throughput", *PHASES):
        values = per_run_map(side, metric, case)
        split = rules.two_modes(values)
        if split is None:
            continue
        unit = "" if metric in ("throughput", "resets_per_step") else " ms"
        fmt = "{:,.0f}" if metric == "throughput" else "{:.3g}"
        groups = " and ".join(f"{fmt.format(float(np.median([values[r] for r in runs])))}{unit} (runs {', '.join(map(str, runs))})"
                              for runs in split)
        parts.append(f"{metric.removesuffix('_ms')}: {groups}")
    return "; ".join(parts)


def batch_drift(side: Side, case: str) -> tuple[bool, str]:
    """The DRIFT rule (mbaphases.stats.rules.drifts) on one case's runs by batch, with each
    batch's median [min, max] as text."""
    v = side.values
    x = v[(v.case == case) & (v.metric == "throughput")]
    groups = {}
    for run, value in zip(x.run, x.value):
        batch = side.batches.get(run)
        if batch is not None:
            groups.setdefault(batch, []).append(value)
    if len(groups) < 2:
        return False, ""
    text = "; ".join(f"{k}: {float(np.median(g)):,.0f} [{min(g):,.0f}, {max(g):,.0f}] ({len(g)} runs)"
                     for k, g in groups.items())
    return rules.drifts(groups), text
