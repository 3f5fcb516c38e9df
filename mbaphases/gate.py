"""The gate: is the candidate's throughput at least ``threshold`` x baseline?

Per case, from the per-run throughputs, on the distribution-free confidence
interval of the ratio candidate / baseline at the stated confidence (default
90%; see mbaphases.stats.intervals):
Runs are compared only on one hardware and, where batches are recorded, inside
the batches both sides ran in, combined as strata (van Elteren's stratified
rank statistic and its Hodges-Lehmann interval; mbaphases.comparable). Paired runs
of sides that met in fewer than MIN_PAIRS pairs (a round-robin) are compared
through every pair of the batch, each pair's slot a block (the intra-block
least-squares fit, a t interval; mbaphases.stats.blocks), with the unpaired
rank interval of the same runs beside it. Pairs in turns: the turn bias predicted for the runs'
profile and host class (mbaphases/turn_bias.toml) is subtracted from the log ratio and its standard
error added in quadrature, so the interval, at the stated level, is for each side alone.
* PASS: the interval's lower end clears the threshold;
* FAIL: its upper end is below the threshold;
* INCONCLUSIVE: the threshold lies inside it (or the runs are too few for any
  interval at this confidence);
* MISSING: a side has fewer successful runs than required, or a failed run;
* MISALIGNED: the two sides ran different case configurations (dims, num_envs,
  replay capacity, decimation, ...) or on different hardware (machine, CPU,
  core count, GPU; unless a cross-machine comparison is declared), so they are
  not comparable;
* EXCEPTED: listed by the maintainer in the exceptions file (with a reason and
  optionally an own threshold, which its interval must then clear).

The candidate's verdict over its cases: PASS when every case PASSes (intersection-union), FAIL when
some case's interval at the family level (Bonferroni over the cases) lies below the threshold, each
wrong at most (1 - confidence) / 2 (verdict_rule). At 3 vs 3 runs and 90% the interval is [min c / max b, max c / min b], the
seed's interval rule; more runs narrow it. From five runs per side a one-sided
Mann-Whitney p-value on the scaled throughputs is added for information.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from mbaphases import comparable, inputs, turn_bias
from mbaphases.errors import UsageError
from mbaphases.side import Side
from mbaphases.stats import blocks as blocks_mod
from mbaphases.stats import intervals, rules
from mbaphases.tables import missing, per_run, per_run_map

STATUSES = ("PASS", "FAIL", "INCONCLUSIVE", "MISSING", "MISALIGNED", "EXCEPTED")


@dataclass
class Exception_:
    case: str
    reason: str
    threshold: float | None = None
    decided_by: str | None = None
    decided_on: str | None = None

    @property
    def decision(self) -> str:
        who = " ".join(x for x in (self.decided_by and f"by {self.decided_by}",
                                   self.decided_on and f"on {self.decided_on}") if x)
        return f"{self.reason}" + (f" (decided {who})" if who else "")


def load_exceptions(path: Path | None, known_cases: list[str]) -> dict[str, Exception_]:
    """The maintainer's exceptions; a file that is named must exist and be valid."""
    if path is None:
        return {}
    doc = inputs.load_exceptions_doc(Path(path))
    out = {}
    for e in doc.get("exception", []):
        case = e["case"]
        if case not in known_cases:
            raise UsageError(f"exceptions file {path}: unknown case {case!r}; valid: {', '.join(known_cases)}")
        if case in out:
            raise UsageError(f"exceptions file {path}: case {case!r} is listed twice; keep one decision per case")
        thr = e.get("threshold")
        on = e.get("decided_on")
        out[case] = Exception_(case, e["reason"], None if thr is None else float(thr), e.get("decided_by"),
                               None if on is None else str(on))
    return out


def misaligned(b: Side, c: Side, case: str) -> list[str]:
    ab, ac = b.alignment.get(case), c.alignment.get(case)
    if ab is None or ac is None:
        return []
    out = []
    for k in sorted(k for k in set(ab) | set(ac) if ab.get(k) != ac.get(k)):
        if k == "active_phases":
            out.append(f"active window phases ({ab.get(k)} vs {ac.get(k)})")
        elif k == "definition":
            out.append("definition of the active window (the entries measure different things)")
        else:
            out.append(k)
    return out


def evaluate(b: Side, c: Side, cases: list[str], threshold: float, min_runs: int,
             exceptions: dict[str, Exception_], hardware_diff: list[str] | None = None,
             confidence: float = rules.DEFAULT_CONFIDENCE,
             block_fits: dict[str, blocks_mod.Fit] | None = None) -> list[dict]:
    """``hardware_diff``: hardware the sides differ in and that was not declared intended;
    absolute throughputs from different machines are not comparable. ``block_fits``: per case,
    the intra-block fit of every side's paired runs (mbaphases.comparable.block_fits)."""
    rows = []
    for case in cases:
        xb, xc = per_run(b, "throughput", case), per_run(c, "throughput", case)
        fb = b.failed[b.failed.case == case]
        fc = c.failed[c.failed.case == case]
        row = {"case": case, "threshold": threshold, "confidence": confidence, "lower": None, "upper": None,
               "estimate": None, "k": None, "coverage": None, "smallest_detectable_change": None,
               "runs_needed": None, "p_value": None, "note": "", "decision": None, "strata": None, "method": None}
        if len(xb) < min_runs or len(xc) < min_runs or len(fb) or len(fc):
            row["gate"] = "MISSING"
            parts = [f"baseline {len(xb)} runs", f"candidate {len(xc)} runs"]
            # the case's own error, as the target raised it (the first run's; the runs list says how often)
            parts += [f"{name} failed in {', '.join(sorted(f.run))}: {str(f.message.iloc[0])[:300]}"
                      for name, f in (("baseline", fb), ("candidate", fc)) if len(f)]
            row["note"] = f"needs >= {min_runs} successful runs per side; " + "; ".join(parts)
            rows.append(row)
            continue
        run_b, run_c = per_run_map(b, "throughput", case), per_run_map(c, "throughput", case)
        strata = comparable.block_runs(b, c, run_b, run_c)
        blocks = comparable.block_values(strata, run_b, run_c)
        iv = intervals.ratio_interval(xb, xc, confidence, blocks)
        ct = comparable.pair_contrast((block_fits or {}).get(case), b, c, confidence)
        if ct is not None:
            solo = iv
            iv = intervals.RatioInterval(ct.lower, ct.upper, ct.estimate, None, confidence, len(xb), len(xc),
                                         ct.pairs, f"intra-block t ({ct.df} df)")
            row.update(lower=iv.lower, upper=iv.upper, estimate=iv.estimate, coverage=confidence,
                       smallest_detectable_change=iv.half_width, strata=ct.pairs, method=iv.method,
                       strata_text=f"{ct.pairs} pairs as blocks",
                       unpaired={"lower": solo.lower, "upper": solo.upper, "estimate": solo.estimate},
                       note=(f"compared through the batch's {ct.pairs} pairs of every side, each pair's slot a "
                             f"block (intra-block least squares, t on {ct.df} df; a run's spread beyond its slot "
                             f"{ct.residual_sd:.1%}); unpaired view " + (f"[{solo.lower:.3f}, {solo.upper:.3f}]"
                                                                          if not missing(solo.lower) else
                                                                          "no interval")))
        else:
            row.update(lower=iv.lower, upper=iv.upper, estimate=iv.estimate, k=iv.k, coverage=iv.coverage,
                       smallest_detectable_change=iv.half_width, strata=iv.strata, method=iv.method,
                       strata_text=comparable.strata_text(b, c, strata))
            if len(blocks) > 1:
                row["note"] = (f"paired over {row['strata_text']} (Wilcoxon signed-rank of the per-pair ratios, exact)"
                               if iv.method.startswith("signed-rank")
                               else f"stratified over {row['strata_text']} (van Elteren, {iv.method})")
                unpaired = comparable.blocks(b, c, run_b, run_c, paired=False)
                if len(unpaired) != len(blocks):
                    # the same runs as if they had not run in pairs: what the pairing bought
                    solo = intervals.ratio_interval(xb, xc, confidence, unpaired)
                    row["unpaired"] = {"lower": solo.lower, "upper": solo.upper, "estimate": solo.estimate}
                    row["note"] += (f"; unpaired view [{solo.lower:.3f}, {solo.upper:.3f}]"
                                    if not missing(solo.lower) else "; unpaired view: no interval")
                row["p_value"] = (intervals.stratified_p_less(blocks, threshold)
                                  if min(len(xb), len(xc)) >= rules.RANK_TEST_MIN_RUNS else None)
            else:
                row["p_value"] = rules.rank_test_p(xb, xc, threshold)
        iv, row = _turn_bias(iv, row, b, c, run_b, run_c, ct.df if ct is not None else math.inf, confidence)
        diff = misaligned(b, c, case)
        if diff or hardware_diff:
            row["gate"] = "MISALIGNED"
            row["note"] = "; ".join(
                ([f"case configurations differ: {', '.join(diff)}"] if diff else [])
                + ([f"measured on different hardware: {', '.join(hardware_diff)}"] if hardware_diff else []))
            rows.append(row)
            continue
        status = intervals.status(iv, threshold)
        if iv.lower is None:
            row["note"] = f"{len(xb)} vs {len(xc)} runs cannot give a {confidence:.0%} interval"
        if status == "INCONCLUSIVE":
            row["runs_needed"] = intervals.runs_needed(iv, threshold, confidence, row.get("turn_bias_half") or 0.0)
            if row.get("turn_bias_half") and row["runs_needed"] is None and iv.lower is not None:
                row["note"] += ("; the estimate lies within the turn-bias correction's own error of the threshold: no "
                                "number of pairs in turns decides it (runs alone can)")
        status = _excepted(status, row, iv, exceptions.get(case))
        row["gate"] = status
        rows.append(row)
    caveat = comparable.cpus_caveat(b, c)  # on every verdict, MISSING ones too
    for row in rows if caveat else []:
        row["note"] = ((row.get("note") or "") + caveat).removeprefix("; ")
    return rows


def _excepted(status: str, row: dict, iv: intervals.RatioInterval, exc: Exception_ | None) -> str:
    """The status once the case's exception (gate-exceptions.toml) is applied, its note in ``row``."""
    if exc is None:
        return status
    row["decision"] = exc.decision
    if exc.threshold is None:
        row["note"] = f"excepted: {exc.decision}"
        return "EXCEPTED"
    own = intervals.status(iv, exc.threshold)
    row["threshold"] = exc.threshold
    if own == "PASS":
        row["note"] = f"excepted at {exc.threshold:.2f}: {exc.decision}"
        return "EXCEPTED"
    row["note"] = f"excepted only at >= {exc.threshold:.2f}, which it does not clear: {exc.decision}"
    return own


def _turn_bias(iv: intervals.RatioInterval, row: dict, b: Side, c: Side, run_b, run_c, df: float,
               confidence: float):
    """Pairs in turns: the interval with the predicted turn bias of its class subtracted and its error
    added in quadrature (mbaphases.turn_bias), the note saying which; other designs as they are.
    ``df``: the interval's own degrees of freedom (math.inf for a rank interval)."""
    where = comparable.turns_class(b, c, run_b, run_c)
    corr = turn_bias.applying(*where, b.revision, c.revision) if where and iv.lower is not None else None
    if corr is None:
        return iv, row
    fixed = intervals.correct_bias(iv.lower, iv.upper, iv.estimate, df, confidence, corr.bias, corr.se, corr.df)
    iv = dataclasses.replace(iv, lower=fixed.lower, upper=fixed.upper, estimate=fixed.estimate)
    row.update(lower=fixed.lower, upper=fixed.upper, estimate=fixed.estimate, smallest_detectable_change=iv.half_width,
               coverage=confidence, turn_bias=corr.bias, turn_bias_se=corr.se, turn_bias_source=corr.how,
               turn_bias_half=intervals.quantile(confidence, fixed.df) * corr.se,
               before_turn_bias={"lower": row["lower"], "upper": row["upper"], "estimate": row["estimate"]},
               method=f"{row['method']}, turn bias {corr.bias:+.4f} corrected (se {corr.se:.4f} in quadrature)",
               note=((row.get("note") or "") + turn_bias.note(corr, confidence)).removeprefix("; "))
    return iv, row


def family_confidence(confidence: float, rows: list[dict]) -> float:
    """The level at which a case's FAIL speaks for the whole candidate: Bonferroni over the cases that
    have an interval, so that "FAIL if any case FAILs" errs at most (1 - confidence) / 2 together."""
    return 1 - (1 - confidence) / max(cases_with_interval(rows), 1)


def cases_with_interval(rows: list[dict]) -> int:
    """The cases a candidate's verdict is over: those with an interval, neither MISSING nor MISALIGNED."""
    return sum(1 for r in rows if r.get("lower") is not None and r["gate"] not in ("MISSING", "MISALIGNED"))


def verdict(rows: list[dict], family_rows: list[dict] | None = None) -> str:
    """The candidate's verdict over its cases, with a stated error (verdict_rule). PASS: every case
    PASSes (an intersection-union test: each case's PASS errs at most (1 - confidence) / 2, and so
    does their conjunction, no correction needed). FAIL: some case FAILs at the family level
    (``family_rows``: the same cases at family_confidence), so that a candidate with every case at the
    threshold FAILs at most (1 - confidence) / 2 (at each case's own level, 7 cases would FAIL it about
    30% of the time). Without ``family_rows``, the cases' own FAILs."""
    statuses = {r["gate"] for r in rows}
    if statuses & {"MISSING", "MISALIGNED"}:
        return "INCOMPLETE"
    failing = {r["case"] for r in (rows if family_rows is None else family_rows) if r["gate"] == "FAIL"}
    if failing & {r["case"] for r in rows if r["gate"] == "FAIL"}:
        return "FAIL"
    if statuses <= {"PASS", "EXCEPTED"}:
        return "PASS"
    return "INCONCLUSIVE"


def verdict_rule(confidence: float, family: float, cases: int) -> str:
    """The verdict's rule and its error, in words (every report and summary.json say it)."""
    error = (1 - confidence) / 2
    return (f"the candidate PASSes when every case PASSes at {confidence:.0%} (intersection-union: a false PASS at "
            f"most {error:.1%}); it FAILs when some case's {family:.2%} interval (Bonferroni over the {cases} cases "
            f"with an interval) lies below the threshold (a false FAIL at most {error:.1%}, whatever the cases' "
            "dependence); otherwise INCONCLUSIVE")
