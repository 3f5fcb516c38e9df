"""The report's files: report.md, summary.json (schema: docs/summary-schema.md), one CSV per
table, flame graphs; the same tables printed to the terminal."""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from mbaphases import tables
from mbaphases.analysis import Overview, Report, overall_verdict
from mbaphases.stats.intervals import FamilyMarks
from mbaphases.views import (
    DEFINITIONS,
    FUNCTIONS_TEXT,
    PHASE_LABELS,
    _md,
    decision_section,
    family_text,
    generated_at,
    hardware_verdicts,
    overview_tables,
    view_tables,
)

SCHEMA = "mbaphases.summary/5"


def family_summary(marks: FamilyMarks | None, min_share: float) -> dict | None:
    if marks is None:
        return None
    return {"changes": marks.size, "selected": sum(1 for x in marks.selected if x),
            "false_discovery_rate": marks.error, "chance_marks_unadjusted": marks.chance_marks,
            "min_share": min_share, "false_discovery_rate_any_dependence": marks.any_dependence,
            "method": ("Benjamini-Hochberg over t p-values of the per-run values (Welch in one batch; a level per "
                       "batch in several; each side's noisiness through round-robin pairs): the rate as stated for "
                       "independent or positively dependent changes, false_discovery_rate_any_dependence under any "
                       "(Benjamini-Yekutieli's bound); a mark is a selected change whose interval also excludes 0 "
                       "and that is at least min_share; intervals marginal")}


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
                "delta_active": a.get("delta_active_ms"), "delta_sum_of_median_changes": a.get("delta_sum_ms"),
                "delta_active_median": a.get("delta_active_median_ms")},
            "attribution": {k: {"delta_ms": a.get("delta_active_ms" if k == "active" else f"{k}_ms"),
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
            "dispersion": {s: {k: d.loc[s].get(k) for k in ("n", "range_pct", "cv", "within_run", "wide", "drift",
                                                            "batches", "first_last", "transient", "flagged_runs", "modes")}
                           for s in d.index},
            "gate": g.gate,
            "gate_detail": {k: g.get(k) for k in ("threshold", "confidence", "lower", "upper", "estimate", "k",
                                                  "coverage", "strata", "method", "smallest_detectable_change",
                                                  "runs_needed", "p_value", "note", "decision",
                                                  "flagged_runs", "without_flagged", "turn_bias", "turn_bias_se",
                                                  "turn_bias_source", "family_confidence", "family_gate")}
            | {"strata_text": g.get("strata_text") if isinstance(g.get("strata_text"), str) else None,
               # pairs: the same runs' interval as if unpaired, beside the paired one
               "unpaired": g.get("unpaired") if isinstance(g.get("unpaired"), dict) else None,
               # pairs in turns: the interval (and its estimate) before the turn bias was corrected
               "before_turn_bias": g.get("before_turn_bias") if isinstance(g.get("before_turn_bias"), dict) else None},
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
        "## For the maintainer: decision", decision_section(rep),
    ]
    return "\n\n".join(parts) + "\n"


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


def slug(label: str) -> str:
    """A candidate's folder name in the report and on the page."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-").lower() or "candidate"


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
        "each the estimate of its own interval (Hodges-Lehmann of the runs, distribution-free); between sides of a "
        "round-robin batch, the active time, "
        "physics, update_state and reset_done through every side's pairs (the gate's intra-block fit, on each "
        "figure; its point is the reference's median changed by the fitted ratio).",
        family_text(ov.family, ov.min_share, "this ledger (every candidate, case and column)",
                    ov.reports[0].confidence),
        _md(v["ledger"]),
    ]
    if len(v["additivity"]):
        parts += ["## Additivity: do the single optimizations add up?",
                  "The interaction is the combined commit's measured change minus the sum of the single "
                  "optimizations' changes (all against the same reference). Where every side ran in pairs, a "
                  "contrast of the active time's intra-block fit (each pair's slot out, as in the gate; the "
                  "interval by the delta method); otherwise a stratified percentile bootstrap over the runs of "
                  "every side involved (its point the resamples' median). The method column says which. The margin "
                  "is set before the data (pins `[ledger] additivity_margin`, a share of the reference's active "
                  "time in the case, default 5%). The last row of each combined candidate pools the cases: a "
                  "random-effects summary of their interactions as shares of the reference's active time "
                  "(Paule-Mandel, the wider of t and HKSJ on cases - 1 df), against the same share. Adds up: "
                  "the interval lies inside ± the margin; "
                  "does not add up: it lies wholly beyond it; undetermined otherwise (the runs per side an interval "
                  "of this spread would need).", _md(v["additivity"])]
    parts += ["## History (first-parent order)", " → ".join(ov.history)]
    for r in ov.reports:
        parts += [f"## {r.candidate.label}: decision", decision_section(r)]
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


def print_all(built: list[tuple], out: Path, page: Path | None, stream) -> None:
    """The tables of every comparison as aligned text, then where the files are."""
    try:
        for unit, reps, overview in built:
            if len(built) > 1:
                print(f"\n################ hardware {unit.label} ({unit.folder})", file=stream)
            for rep in reps:
                if len(reps) > 1:
                    print(f"\n######## {rep.candidate.label} vs {rep.baseline.label}", file=stream)
                print_tables(rep, stream)
            if overview is not None:
                print_overview(overview, stream)
        if len(built) > 1:
            print("\n######## VERDICT PER HARDWARE (never pooled): "
                  + "; ".join(f"{u.label}: {overall_verdict([r.verdict for r in reps])}" for u, reps, _ in built),
                  file=stream)
        print(f"\nreport: {out / 'report.md'}\nsummary: {out / 'summary.json'}", file=stream)
        if page:
            print(f"page: {page}", file=stream)
        stream.flush()
    except BrokenPipeError:
        # the reader stopped early (| head): the verdict stands, the rest is not printed
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
