"""Runs added until decisive, in one home: the plan (how many looks, at which confidence each),
the rounds `mbaphases run --until-decisive` adds (for the candidates with an INCONCLUSIVE case,
and one replacement round for sides with runs flagged BUSY or STEAL), and what the report makes
of a batch that looked repeatedly."""
from __future__ import annotations

import math
import time
from pathlib import Path

from mbaphases import comparable, inputs, load
from mbaphases import gate as gate_mod
from mbaphases.errors import UsageError
from mbaphases.side import Side
from mbaphases.stats import intervals, rules


def plan(pins: dict, runs: int, max_runs: int, budget_min: float) -> dict:
    """The batch record's ``until_decisive``: a look after the pinned rounds and after every round
    added, the error spent over the looks by a spending function (rules.look_levels), so that every
    look's interval covers together at the nominal confidence."""
    if max_runs < runs:
        raise UsageError(f"--max-runs {max_runs} must be >= the pinned runs ({runs})")
    if not (budget_min > 0):  # NaN compares false: refused too
        raise UsageError(f"--budget-min {budget_min} must be > 0")
    g = pins.get("gate", {})
    confidence = float(g.get("confidence", rules.DEFAULT_CONFIDENCE))
    sizes = list(range(runs, max_runs + 1))
    levels = rules.look_levels(confidence, sizes)
    return {"max_runs": max_runs, "budget_s": 60 * budget_min, "planned_looks": len(sizes), "looks_at": sizes,
            "levels": levels, "spending": rules.SPENDING, "confidence": levels[-1], "nominal_confidence": confidence,
            "threshold": float(g.get("threshold", rules.DEFAULT_THRESHOLD))}


def settle_looks(until: dict, paired: bool, fitted: bool, earlier: int) -> dict:
    """The plan's error spent over the planned looks that can decide (rules.deciding_looks): a look
    whose pairs (or runs) are too few for the design's interval at its level takes no share.
    ``earlier``: runs a side this machine already holds of these sides (a look pools them); with
    earlier independent runs, or a fitted design (round-robin pairs: an interval from two runs on),
    every look counts."""
    sizes = [earlier + n for n in until["looks_at"]]
    every = fitted or (earlier > 0 and not paired)
    deciding = rules.deciding_looks(until["nominal_confidence"], sizes,
                                    (lambda n, c: True) if every else (lambda n, c: intervals.has_interval(n, c, paired)))
    levels = [deciding.get(i) for i in range(len(sizes))]
    last = [x for x in levels if x is not None]
    return {**until, "levels": levels, "counted_looks": len(deciding),
            "confidence": last[-1] if last else until["nominal_confidence"]}


def level_at(until: dict, look: int) -> float | None:
    """The level of look ``look`` (1: after the pinned rounds); None for a look that decides nothing.
    Records made before the spending function split the error evenly (Bonferroni)."""
    if "levels" not in until:
        return until["confidence"]
    levels = until["levels"]
    return levels[min(look, len(levels)) - 1]


def stopping_level(until: dict, taken: int, confidence: float) -> float:
    """The level one until-decisive batch's verdicts are decided at, after ``taken`` looks: the
    stopping look's level (a look that could not decide, too few runs, takes the next one's), never
    below ``confidence`` (the report's); records from before the spending function split the error
    evenly over their looks (Bonferroni). The report and the batch's profiles both decide so."""
    nominal = float(until["nominal_confidence"])
    if "levels" not in until:
        return max(confidence, rules.split_confidence(nominal, int(until.get("counted_looks", until["planned_looks"]))))
    later = [x for x in until["levels"][taken - 1:] if x is not None] or [x for x in until["levels"] if x]
    return max(confidence, later[0] if later else nominal)


def plan_line(until: dict) -> str:
    if "levels" not in until:
        return (f"until decisive: up to {until['planned_looks']} look(s), up to {until['max_runs']} runs a side; each "
                f"look at {until['confidence']:.4f} confidence")
    looks = ", ".join(f"{n} runs a side at {level:.4f}" if level is not None else f"{n} runs a side: none (too few)"
                      for n, level in zip(until["looks_at"], until["levels"]))
    return (f"until decisive: up to {until['planned_looks']} look(s), up to {until['max_runs']} runs a side; the "
            f"{1 - until['nominal_confidence']:.0%} error spent over the looks that can decide by the "
            f"{until.get('spending', rules.SPENDING)} function (every look's interval at its own level, all of them "
            f"covering together at {until['nominal_confidence']:.0%}): {looks}")


def add_rounds(until: dict, conf_path: Path, pins: dict, sides: list[dict], machine: str, names: dict,
               record: dict, started: float, runs: int, rc: int, run_round, metas, out) -> tuple[int, int]:
    """After the pinned runs: one interleaved round at a time while a candidate has an INCONCLUSIVE
    case (or the first look finds flagged runs), within the runs and time of the plan. ``run_round(order,
    number)`` runs one round of those SHAs; ``metas()`` lists this batch's run metas. Returns (runs per
    side done, the rounds' exit status)."""
    done_runs, looks, replaced = runs, 0, False
    while True:
        looks += 1
        open_cases = open_at_look(until, looks, conf_path, pins, sides, machine, out)
        record["looks"] = looks
        # a run another process or the hypervisor disturbed stays in; its sides get one
        # replacement round, so no verdict has to rest on it alone
        flagged = [] if replaced else flagged_sides(sides, metas())
        if not open_cases and not flagged:
            print(f"[until decisive] look {looks}: every case decided after {done_runs} runs per side",
                  file=out, flush=True)
            break
        what = (f"{len(open_cases)} case(s) still INCONCLUSIVE" if open_cases else
                f"no replacement round for the flagged runs of {', '.join(x['label'] for x in flagged)}")
        if open_cases and not flagged and beyond_reach(open_cases, until["max_runs"]):
            # the spread measured so far says no round within the plan decides an open case: the
            # machine time of those rounds would buy no verdict
            needs = sorted(n for *_, n in open_cases if n != math.inf)
            why = (f"they need about {needs[0]}-{needs[-1]} runs a side" if needs else "")
            bias = sum(1 for *_, n in open_cases if n == math.inf)
            why += ("; " if why and bias else "") + (f"{bias} lie within the turn-bias correction's own error of the "
                                                     "threshold" if bias else "")
            print(f"[until decisive] stopping after look {looks}: at this spread no open case decides within "
                  f"--max-runs {until['max_runs']} ({why}); {what}", file=out, flush=True)
            record["stopped"] = "beyond reach"
            break
        if done_runs >= until["max_runs"]:
            print(f"[until decisive] stopping at --max-runs {until['max_runs']}: {what}", file=out, flush=True)
            break
        if time.time() - started >= until["budget_s"]:
            print(f"[until decisive] stopping: time budget of {until['budget_s']:.0f} s spent; {what}",
                  file=out, flush=True)
            break
        done_runs += 1
        if flagged:
            replaced = True
            record["replacement_round"] = {"round": done_runs, "sides": [x["label"] for x in flagged]}
            print(f"[until decisive] replacement round for flagged runs: {', '.join(x['label'] for x in flagged)}",
                  file=out, flush=True)
        round_shas = [x["sha"] for x in sides if x in flagged or x in sides_for_round(sides, open_cases)]
        # rotated every round and reversed every other: no side always first or after one neighbour
        k = done_runs % len(round_shas)
        order = round_shas[k:] + round_shas[:k]
        print(f"[until decisive] round {done_runs}: {', '.join(names[x] for x in order)}", file=out, flush=True)
        rc = run_round(order if done_runs % 2 else order[::-1], done_runs) or rc
    return done_runs, rc


def open_at_look(until: dict, look: int, conf_path: Path, pins: dict, sides: list[dict], machine: str,
                 out) -> list[tuple[str, str, int | None]]:
    """The open cases at look ``look``, at its level; a look that cannot decide leaves every case open."""
    level = level_at(until, look)
    if level is None:
        return [(x["label"], case, None) for x in sides[1:] for case in pins["cases"]]
    return undecided(conf_path, pins, sides, machine, {**until, "confidence": level}, out)


def beyond_reach(open_cases: list[tuple[str, str, int | None]], max_runs: int) -> bool:
    """Every open case needs more runs a side than the plan allows (the gate's runs needed: its
    interval shrinking as 1/sqrt(runs) about its estimate). A case without an interval yet (too few
    runs for one) has no measured spread to say so: None, and the rounds go on."""
    return all(n is not None and n > max_runs for *_, n in open_cases)


def sides_for_round(sides: list[dict], open_cases: list[tuple[str, str, int | None]]) -> list[dict]:
    """The sides an extra round runs: the candidates with an open case and the baseline they
    are compared with; a decided candidate gets no more runs."""
    open_labels = {label for label, *_ in open_cases}
    return [x for x in sides if x["role"] == "baseline" or x["label"] in open_labels]


def flagged_sides(sides: list[dict], metas: list[dict]) -> list[dict]:
    """The sides whose runs in this batch were flagged (BUSY, STEAL), with the baseline whenever
    any is: a replacement run of a candidate is compared with the baseline's runs of the same
    batch; a flagged baseline run touches every candidate's comparison, so then every side."""
    disturbed = {m["commit"] for m in metas if load.run_flags(m)}
    if not disturbed:
        return []
    if sides[0]["sha"] in disturbed:
        return list(sides)
    return [x for x in sides if x["role"] == "baseline" or x["sha"] in disturbed]


def gate_rows(conf_path: Path, pins: dict, sides: list[dict], machine: str, threshold: float,
              confidence: float) -> dict[str, list[dict]]:
    """Each candidate's gate rows at ``confidence``, compared as the report compares them (per
    hardware, inside the batches both sides ran in, round-robin sides through every side's pairs)."""
    conf = inputs.load_asv_conf(conf_path)
    results_dir = conf_path.parent / conf.get("results_dir", "results")
    repo = conf_path.parent / conf["repo"]
    base = load.load_asv_side(sides[0]["label"], sides[0]["sha"], results_dir, machine, repo)
    candidates = [load.load_asv_side(x["label"], x["sha"], results_dir, machine, repo) for x in sides[1:]]
    rows_of: dict[str, list[dict]] = {x["label"]: [] for x in sides[1:]}
    for unit in comparable.by_hardware(base, candidates, 1):
        # round-robin sides are compared through every side's pairs, as the report does
        fits = comparable.block_fits([unit.baseline, *unit.candidates])
        for cand, side in zip(sides[1:], unit.candidates):
            paired_base, paired, _ = comparable.pair(unit.baseline, side)
            rows_of[cand["label"]] += gate_mod.evaluate(paired_base, paired, pins["cases"], threshold, 1,
                                                        {}, confidence=confidence, block_fits=fits)
    return rows_of


def failed_cases(conf_path: Path, pins: dict, sides: list[dict], machine: str, threshold: float,
                 confidence: float) -> dict[str, list[str]]:
    """candidate -> the cases its gate FAILs at ``confidence``: the decided slowdowns a function
    profile has to explain."""
    rows_of = gate_rows(conf_path, pins, sides, machine, threshold, confidence)
    return {label: list(dict.fromkeys(r["case"] for r in rows if r["gate"] == "FAIL"))
            for label, rows in rows_of.items()}


def undecided(conf_path: Path, pins: dict, sides: list[dict], machine: str, until: dict,
              out) -> list[tuple[str, str, int | None]]:
    """(candidate, case, runs a side the gate says it needs) still INCONCLUSIVE, at the confidence
    per planned look."""
    rows_of = gate_rows(conf_path, pins, sides, machine, until["threshold"], until["confidence"])
    open_cases, seen = [], set()
    for cand in sides[1:]:
        for row in rows_of[cand["label"]]:
            if row["gate"] == "INCONCLUSIVE" and (cand["label"], row["case"]) not in seen:
                seen.add((cand["label"], row["case"]))
                lo, hi = row["lower"], row["upper"]
                span = f"[{lo:.3f}, {hi:.3f}]" if lo is not None else "n/a"
                need = row.get("runs_needed") if row["lower"] is not None else None
                if row["lower"] is not None and need is None:
                    # within the turn-bias correction's own error of the threshold: no number of pairs in
                    # turns decides it
                    need = math.inf
                print(f"[until decisive] {cand['label']} {row['case']}: INCONCLUSIVE, interval {span}"
                      + (", within the turn-bias correction's error of the threshold: more pairs cannot decide it"
                         if need == math.inf else f", needs about {need} runs a side" if need else ""),
                      file=out, flush=True)
                open_cases.append((cand["label"], row["case"], need))
    return open_cases




def stopping(records: list[str], sides: list[Side], confidence: float) -> tuple[float, list[str]]:
    """Runs added until decisive looked at the data repeatedly. One such batch: the report decides
    at the level of the look the batch stopped at (its spending plan; every look's interval covers
    together at the nominal confidence). Several pooled (or records from before the spending plan):
    the nominal error split evenly over every planned look of every one (Bonferroni: two batches of
    2 looks each are 4 looks)."""
    batches = {bt for s in sides for bt in s.batches.values()}
    notes, looked = [], []
    for path in records:
        rec = load.read_json_file(Path(path))
        until = rec.get("until_decisive")
        if rec.get("batch") in batches and until:
            looked.append((rec, until))
            counted = int(until.get("counted_looks", until["planned_looks"]))
            notes.append(f"batch {rec['batch']} added runs until decisive: {rec.get('looks', 0)} look(s) taken of "
                         f"{until['planned_looks']} planned"
                         + (f", the error spent over {counted} (the looks too small for an interval spend none)"
                            if counted != until["planned_looks"] else ""))
        stop = rec.get("deadline") or {}
        if rec.get("batch") in batches and stop.get("not_started"):
            notes.append(f"batch {rec['batch']} stopped at its deadline: {stop['not_started']} planned pairs or rounds "
                         "never started; the verdicts are the completed runs', an open case says about how many "
                         "runs would decide it (`mbaphases run --resume` goes on with the batch)")
    if not looked:
        return confidence, notes
    nominal = min(float(u["nominal_confidence"]) for _, u in looked)
    if len(looked) == 1 and "levels" in looked[0][1]:
        rec, until = looked[0]
        taken = max(int(rec.get("looks") or 1), 1)
        level = stopping_level(until, taken, confidence)
        notes.append(f"every verdict at {level:.4f} confidence: look {taken} of the batch's "
                     f"{until.get('spending', rules.SPENDING)} spending of the {1 - nominal:.0%} error over its "
                     "looks (every look's interval covering together at "
                     f"{nominal:.0%})")
        return level, notes
    looks = sum(int(u.get("counted_looks", u["planned_looks"])) for _, u in looked)
    level = max(confidence, rules.split_confidence(nominal, looks))
    notes.append(f"every verdict at {level:.4f} confidence: the {nominal:.0%} error split over "
                 f"{looks} look(s) of the report's until-decisive batches (a look too small for an interval "
                 "takes no share)")
    return level, notes
