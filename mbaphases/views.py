"""The report's views: the tables as text, the marks, the decision section and the definitions
(written once here, read by the markdown, the terminal and the pages)."""
from __future__ import annotations

import math
import os
from datetime import UTC, datetime

import pandas as pd

from mbaphases import gate as gate_mod
from mbaphases import tables
from mbaphases.analysis import Overview, Report, overall_verdict
from mbaphases.stats.intervals import BOOTSTRAP_RESAMPLES, FamilyMarks

NOISE_MARK = "≈0"  # a change whose interval contains 0: not distinguishable from run-to-run noise


SMALL_MARK = "small"  # selected, but below the share of the active time that counts (pins [marks])


DEFINITIONS = {
    "run_value": "A run's value for a metric is the entry's per-run figure: throughput is "
                 "collector_active_steps_per_sec; a phase is the mean over the run's recorded vector steps.",
    "side_figure": "A side's figure is the median of its runs, shown with [min, max].",
    "ratio": "ratio = candidate median / baseline median of throughput (env steps/s).",
    "attribution": "Branch-level decomposition of the change in active ms per vector step: per run, active = "
                   "physics + (step_core - physics) + update_state + reset_done + rest of env_step + replay + "
                   "bookkeeping; each part's change is the Hodges-Lehmann estimate of the per-run differences (by "
                   "batch or pair), the point of its own distribution-free interval (inverting the rank test); "
                   f"a change whose interval contains 0 is marked {NOISE_MARK} (not distinguishable from run-to-run "
                   "noise). The active row is the active time's own change; 'sum of parts' adds the parts' median "
                   "changes and 'Δ median active ms' is the difference of medians (figures of the tables of medians, "
                   "without an interval of their own). A part's share is its change over the whole change, with a "
                   f"percentile bootstrap interval ({BOOTSTRAP_RESAMPLES} resamples, seeded; whole pairs drawn where the "
                   "runs were taken in pairs, each batch's runs otherwise) and the resamples' median as its point. "
                   "It is a decomposition by phase of the whole branch difference, not a measure "
                   "of 'manager overhead'.",
    "comparable": "Runs are compared only on one hardware (machine, CPU model, logical cores, RAM class, GPU): a "
                  "side with runs on several is reported per hardware that the sides share, never pooled. Within a "
                  "hardware, a batch (one `mbaphases run`; plain asv runs: one day) is a block: the sides are "
                  "compared inside the batches both ran in and the batches combined as strata; a batch in which "
                  "only one side ran is left out, and the notes say so.",
    "dispersion": "range % = (max - min) / median; CV = population standard deviation / mean of the per-run "
                  "throughputs (the spread between runs). Within a run: the standard deviation of the log mean "
                  "active time of the run's 10-step windows, the median over runs (the spread inside a run: "
                  "where it is below the CV, more runs pay more than longer ones). WIDE: range above the "
                  "dispersion limit within the runs given. DRIFT: the same "
                  "commit measured in several batches (one `mbaphases run` each) whose [min, max] do not overlap "
                  "and whose medians differ by more than the larger within-batch range. TRANSIENT: the median "
                  "per-step active time of the measured window's first third differs by more than 5% from its "
                  "last third's (median over runs; not in steady state: warmup too short, or the episodes had not "
                  "yet reached their resets). MODES: the runs of a figure (throughput or a phase) fall into two groups "
                  "whose gap is at least 3 times either group's standard deviation and at least 10% (two states of "
                  "the program or the host, such as a phase 4-8 ms a step in some runs and 16-23 in others); the "
                  "column names each mode's median and its runs. Flagged runs: BUSY (other "
                  "processes used > 25% of the CPUs during the run) or STEAL (the hypervisor took > 5%).",
    "interval": "Distribution-free confidence interval of the throughput ratio (Hodges-Lehmann, by inverting "
                "the Mann-Whitney test): sort the m x n ratios c_j / b_i; the k-th smallest to the k-th largest "
                "cover the true ratio with confidence 1 - 2 P(U <= k - 1), U exact below 20 runs a side. At 3 vs 3 "
                "and 90% k = 1: [min c / max b, max c / min b]. estimate = median of the ratios (Hodges-Lehmann). "
                "Smallest detectable change = half the interval's relative width; runs needed = runs per side at "
                "which an interval of this spread, shrinking as 1/sqrt(runs), would clear the threshold. With "
                "several batches: van Elteren's stratified statistic sum_s U_s / (m_s + n_s + 1) inverted the same "
                "way (exact where the counts allow, else normal), so a shift between batches shared by both sides "
                "neither widens nor biases it; one batch is the rule above. Runs in pairs: two sides with at least 5 "
                "pairs of their own are compared pair by pair (Wilcoxon signed-rank of the per-pair ratios); two "
                "sides of a round-robin, which meet in fewer, through every side's pairs: the least-squares fit "
                "of log throughput = side + pair + CPU per case (each pair a block, so a slowdown of "
                "the host during it, shared by both of its runs, cancels; the CPUs swap every round; in turns, "
                "where a pair shares its CPUs, which side took the first turn in place of the CPU), with "
                "Student's t interval of the two sides' difference on the residual degrees of freedom (a normal "
                "model of what is left; the unpaired rank interval of the same runs is shown beside it). Pairs in "
                "turns: the predicted turn bias of the runs' profile and host class subtracted, its standard error "
                "added in quadrature (mbaphases/turn_bias.toml): the interval is for each side alone, at its level.",
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


def _num(x, fmt="{:,.0f}") -> str:
    if tables.missing(x):
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
    how = f"k={int(r['k'])}" if not tables.missing(r.get("k")) else (r.get("strata_text") or f"{int(r.get('strata') or 1)} batches")
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
            f"{marks.error:.0%} (two-sided t p-values of the per-run values: Welch's in one batch, with a level "
            f"per batch in several), has its interval excluding 0, and is at least {min_share:.0%} of the "
            f"baseline's active time (pins [marks] min_share): {sum(1 for x in marks.selected if x)} selected. "
            f"The rate holds as stated for independent or positively dependent changes; these share their runs, "
            f"and under any dependence the bound is {marks.any_dependence:.0%} (Benjamini-Yekutieli). The "
            f"intervals are the marginal {confidence:.0%} ones, not widened for the selection; if nothing had "
            f"moved, about {marks.chance_marks:.1f} of the {marks.size} would exclude 0 by chance alone. "
            f"{NOISE_MARK}: not a mark (not distinguishable from run-to-run noise in this family); {SMALL_MARK}: "
            f"selected but below {min_share:.0%} of the active time.")


def share_text(x, lower, upper) -> str:
    if tables.missing(x):
        return "n/a"
    if tables.missing(lower):
        return _num(x, "{:.0%}")
    return f"{_num(x, '{:.0%}')} [{_num(lower, '{:.0%}')}, {_num(upper, '{:.0%}')}]"


def view_tables(rep: Report) -> dict[str, pd.DataFrame]:
    """The human-readable tables (strings), in the seed's style."""
    return {"gate": _gate_view(rep), "throughput": _throughput_view(rep), "phases": _phases_view(rep),
            "attribution": _attribution_view(rep), "dispersion": _dispersion_view(rep),
            "environment": _environment_view(rep), "functions": _functions_view(rep)}


def _throughput_view(rep: Report) -> pd.DataFrame:
    t = rep.throughput
    thr = pd.DataFrame({
        "case": t.case,
        rep.baseline.label: [f"{_num(m)} [{_num(lo)}, {_num(hi)}]" for m, lo, hi in zip(t.baseline_median, t.baseline_min, t.baseline_max)],
        rep.candidate.label: [f"{_num(m)} [{_num(lo)}, {_num(hi)}]"
                              for m, lo, hi in zip(t.candidate_median, t.candidate_min, t.candidate_max)],
        "ratio (median)": [_num(r, "{:.3f}") for r in t.ratio],
        "runs": [f"{nb} / {nc}" for nb, nc in zip(t.baseline_runs, t.candidate_runs)],
    })
    return thr


def _phases_view(rep: Report) -> pd.DataFrame:
    p = rep.phases
    ph = pd.DataFrame({"case": p.case})
    for key, label in PHASE_LABELS.items():
        fmt = "{:.2f}"
        ph[label] = [f"{_num(x, fmt)} → {_num(y, fmt)}" for x, y in zip(p[f"{key}_baseline"], p[f"{key}_candidate"])]
    return ph


def _attribution_view(rep: Report) -> pd.DataFrame:
    a = rep.attribution
    at = pd.DataFrame({"case": a.case})
    if "delta_sum_ms" in a:
        recs = a.to_dict("records")
        at["Δ active ms [interval]"] = [
            change_text(r.get("delta_active_ms"), r.get("delta_active_lower_ms"), r.get("delta_active_upper_ms"),
                        r.get("delta_active_clear"), small=r.get("delta_active_small")) for r in recs]
        at["Δ median active ms"] = [_num(x, "{:+.2f}") for x in a.delta_active_median_ms]
        at["sum of parts (medians)"] = [_num(x, "{:+.2f}") for x in a.delta_sum_ms]
        for k in tables.ATTRIBUTION:
            at[k] = [change_text(r.get(f"{k}_ms"), r.get(f"{k}_lower_ms"), r.get(f"{k}_upper_ms"), r.get(f"{k}_clear"),
                                 small=r.get(f"{k}_small"))
                     + f"; share {share_text(r.get(f'{k}_share'), r.get(f'{k}_share_lower'), r.get(f'{k}_share_upper'))}"
                     for r in recs]
    return at


def _dispersion_view(rep: Report) -> pd.DataFrame:
    d = rep.dispersion
    flags = []
    modes = [x if isinstance(x, str) else "" for x in d.get("modes", [""] * len(d))]
    for w, dr, tr, mo in zip(d.get("wide", [False] * len(d)), d.get("drift", [False] * len(d)),
                             d.get("transient", [False] * len(d)), modes):
        flags.append(" ".join(f for f, on in (("WIDE", w is True), ("DRIFT", dr is True), ("TRANSIENT", tr is True),
                                              ("MODES", bool(mo))) if on))
    di = pd.DataFrame({
        "case": d.case, "side": d.side, "n": d.n,
        "median": [_num(x) for x in d.get("median", [None] * len(d))],
        "range %": [_num(x, "{:.1%}") for x in d.get("range_pct", [None] * len(d))],
        "CV": [_num(x, "{:.1%}") for x in d.get("cv", [None] * len(d))],
        "within a run": [_num(x, "{:.1%}") for x in d.get("within_run", [None] * len(d))],
        "flag": flags,
        "first/last third": [_num(x, "{:.3f}") for x in d.get("first_last", [None] * len(d))],
        "flagged runs": [x if isinstance(x, str) else "" for x in d.get("flagged_runs", [""] * len(d))],
        "two modes": modes,
        "batches": [x if isinstance(x, str) else "" for x in d.get("batches", [""] * len(d))],
    })
    return di


def _gate_view(rep: Report) -> pd.DataFrame:
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
    return ga


def _environment_view(rep: Report) -> pd.DataFrame:
    e = rep.environment
    env = pd.DataFrame({"": ["≠" if x else "" for x in e.differs], "key": e.key,
                        rep.baseline.label: e.baseline.astype(str), rep.candidate.label: e.candidate.astype(str)}) if len(e) else e
    return env


def _functions_view(rep: Report) -> pd.DataFrame:
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
        # the profiler's own cost: a table read off a program slowed several times describes another one
        "profiled at": [f"{_num(x, '{:.2f}')}x → {_num(y, '{:.2f}')}x" + (" DISTORTED" if d is True else "")
                        for x, y, d in zip(f.get("profiled_at_baseline", [None] * len(f)),
                                           f.get("profiled_at_candidate", [None] * len(f)),
                                           f.get("distorted", [False] * len(f)))],
    }) if len(f) else pd.DataFrame()
    return fn


def _dispersion_lines(d: pd.DataFrame) -> list[str]:
    """The decision section's lines for the sides' drift between batches and transients within runs."""
    lines = []
    for _, row in d[d.get("drift", pd.Series(False, index=d.index)) == True].iterrows():  # noqa: E712
        lines.append(f"- `{row.case}` ({row.side}): DRIFT between batches ({row.batches}). Suggested: rerun "
                     "both sides in one interleaved batch, or an exception naming the drift.")
    for _, row in d[d.get("transient", pd.Series(False, index=d.index)) == True].iterrows():  # noqa: E712
        lines.append(f"- `{row.case}` ({row.side}): TRANSIENT: the measured window's first third ran "
                     f"{row.first_last - 1:+.1%} against its last (not in steady state). Suggested: more warmup "
                     "steps in the profile; the gated figure stays the field's (steps over active time).")
    return lines


def decision_section(rep: Report) -> str:
    """The proposed gate, what misses it, what noise or drift leaves undecided with the
    suggested handling, recorded decisions, and an exceptions snippet to paste."""
    g = rep.gate.to_dict("records")
    how = ("interval of the ratio through every side's pairs"
           if any(str(r.get("method") or "").startswith("intra-block") for r in g)
           else "distribution-free interval of the ratio")
    lines = [f"Proposed gate: candidate throughput >= {rep.threshold:.2f} x baseline on every case, decided on "
             f"the {rep.confidence:.0%} {how} (verdict now: **{rep.verdict}**)."]
    below = [r for r in g if r["gate"] == "FAIL"]
    if below:
        lines.append("Cases below the gate: " + "; ".join(f"`{r['case']}` {interval_text(r)}" for r in below) + ".")
    undecided = [r for r in g if r["gate"] == "INCONCLUSIVE"]
    for r in undecided:
        if not tables.missing(r.get("runs_needed")):
            more = f"about {int(r['runs_needed'])} runs per side (`mbaphases run --until-decisive`)"
        elif not tables.missing(r.get("turn_bias")):
            more = ("runs alone (`--design solo`): it lies within the turn-bias correction's own error of the "
                    "threshold")
        else:
            more = "more runs (`mbaphases run --until-decisive`)"
        lines.append(f"- `{r['case']}`: INCONCLUSIVE, {interval_text(r)} contains {r['threshold']:.2f}; smallest "
                     f"detectable change {_num(r['smallest_detectable_change'], '{:.1%}')}. Suggested: {more}, or an "
                     "exception below.")
    lines += _dispersion_lines(rep.dispersion)
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
                            'decided_by = "..."\ndecided_on = ' + generated_at()[:10]
                            for r in undecided)
        lines.append("Exceptions to paste into the exceptions file, if the maintainer decides so:\n\n```toml\n"
                     + snippet + "\n```")
    if not below and not undecided and len(lines) == 1:
        lines.append("Nothing is below the gate or undecided.")
    return "\n\n".join(lines)


FUNCTIONS_TEXT = ("Per case, for each phase whose change is worth a look (not small, and its interval "
                  "excluding 0, or no interval with these runs; largest first, up to three; where to look, not a "
                  "mark), the functions "
                  "whose time in that phase changed most, in ms per vector "
                  "step: each side's share of the phase's samples in its one profiled run (py-spy, outside the "
                  "measured runs) times the phase's measured time (median of its formal runs). Total: the "
                  "function anywhere below the phase function; self: as the leaf. Share: of the phase's measured "
                  "change (a function that replaces another carries more than 100% of it, the replaced one a negative "
                  "share). Profiled at: each side's profiled run's active time per step over its measured runs' "
                  "median (the sampler's cost); above the limit (pins profile_overhead_limit, 1.3x unless set) the table is "
                  "marked DISTORTED: the sampler's own stops, "
                  "not the program, decided much of what was caught. Flame graphs (red: slower on the candidate) "
                  "are on the page and under flames/.")


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
                       f"ratio of medians to {ov.reference}": [_num(x, "{:.3f}") for x in led.ratio]})
    for key, title in (("delta_sum", "Δ active ms"), ("physics", "Δ physics"), ("update_state", "Δ update_state"),
                       ("reset_done", "Δ reset_done"), ("other", "Δ other")):
        lv[title] = [change_text(r.get(f"{key}_ms"), r.get(f"{key}_lower_ms"), r.get(f"{key}_upper_ms"),
                                 r.get(f"{key}_clear"), "{:+.3f}", r.get(f"{key}_small")) for r in recs]
    a = ov.additivity
    arecs = a.to_dict("records")

    def verdict_text(r):
        v = r.get("additivity")
        if v == "undetermined" and not tables.missing(r.get("runs_needed")):
            return f"undetermined (need about {int(r['runs_needed'])} runs per side)"
        return v if isinstance(v, str) else "n/a"

    def share(r):
        if not tables.missing(r.get("interaction_share")):  # the pooled row
            return change_text(r["interaction_share"], r["interaction_share_lower"], r["interaction_share_upper"],
                               True, "{:+.1%}")
        active = r.get("active_ms_reference")
        if tables.missing(active) or tables.missing(r.get("interaction_ms")) or not active:
            return "n/a"
        return change_text(r["interaction_ms"] / active, r.get("interaction_lower_ms") / active
                           if not tables.missing(r.get("interaction_lower_ms")) else None,
                           r.get("interaction_upper_ms") / active
                           if not tables.missing(r.get("interaction_upper_ms")) else None, True, "{:+.1%}")

    def margin(r):
        if not tables.missing(r.get("margin_share")):
            return f"±{r['margin_share']:.1%} of active"
        return _num(r.get("margin_ms"), "±{:.3f} ms")

    av = pd.DataFrame({
        "combined": a.get("combined", []), "case": a.get("case", []),
        "sum of single gains (Δ ms)": [_num(r.get("sum_of_parts_ms"), "{:+.3f}") for r in arecs],
        "measured (Δ ms)": [_num(r.get("measured_ms"), "{:+.3f}") for r in arecs],
        f"interaction (ms) [{ov.reports[0].confidence:.0%} interval]": [
            change_text(r.get("interaction_ms"), r.get("interaction_lower_ms"), r.get("interaction_upper_ms"), True,
                        "{:+.3f}") for r in arecs],
        f"interaction (share of the reference's active time) [{ov.reports[0].confidence:.0%} interval]":
            [share(r) for r in arecs],
        "margin": [margin(r) for r in arecs],
        "adds up": [verdict_text(r) for r in arecs],
        "method": [r.get("method") if isinstance(r.get("method"), str) else "" for r in arecs],
    }) if len(a) else pd.DataFrame()
    return {"verdicts": verdicts, "ledger": lv, "additivity": av}


def hardware_verdicts(built) -> pd.DataFrame:
    return pd.DataFrame([{"hardware": unit.label, "folder": unit.folder,
                          "verdict": overall_verdict([r.verdict for r in reps]),
                          "candidates": ", ".join(f"{r.candidate.label} {r.verdict}" for r in reps)}
                         for unit, reps, _ in built])
