"""The calibration study: every interval procedure of the suite run on many generated data sets
with a known truth, counting how often its interval covers the truth, whether its printed point lies
inside it, and how often an A/A comparison fails a gate or a family marks a change that is not there.

A claim a report prints ("90% interval", "false discovery rate 10%") is one this study measured. The
scenarios are the designs the suite runs (solo batches, several batches, pairs on two CPUs, pairs in
turns with a shared slot effect larger than the noise within a pair, round-robin pairs) and the host's
ways of being difficult (one side much noisier than the rest, runs in one of two modes). Seeded: the
same table every time (scripts/calibration.py writes it into docs/statistics.md; the test suite
checks it).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from mbaphases.stats import blocks, intervals, rules

NOISE = 0.03  # a run's own spread (log scale)
SLOT = 0.15  # a pair's shared slot effect in turns: larger than the noise within the pair
BATCH = 0.10  # a batch's shift, shared by its sides
NOISY = 4.0  # the noisy side's spread, in NOISE
MODES_GAP = 0.25  # two modes: the slow mode this much slower (log), a run in it with probability 1/3
TRUE_RATIO = 0.95
SEED = 20261206


@dataclass
class Row:
    procedure: str
    scenario: str
    datasets: int
    coverage: float  # share of data sets whose interval covered the truth (A/A: the no-change truth)
    nominal: float  # the level the intervals state, averaged over the data sets (an exact rank interval
    # states its exact coverage; a look of a sequential plan, its own level)
    point_inside: float  # share of data sets whose printed point lies inside its interval
    no_interval: int  # data sets too small for an interval at the confidence (counted as not covering)
    false_fail: float | None = None  # A/A at threshold 1: the gate's FAIL share (at most (1 - nominal) / 2)
    claim: float | None = None  # where the FAIL share is the claim (an overall verdict): its allowed rate

    @property
    def tolerance(self) -> float:
        """The simulation's own error: 2.58 binomial standard errors (two-sided 99%)."""
        return 2.58 * math.sqrt(self.nominal * (1 - self.nominal) / self.datasets)

    @property
    def fail_rate(self) -> float:
        return (1 - self.nominal) / 2 if self.claim is None else self.claim

    @property
    def fail_limit(self) -> float:
        """A/A: the FAIL share allowed, (1 - nominal) / 2 (or the stated claim), plus the simulation's
        error at that rate."""
        rate = self.fail_rate
        return rate + 2.58 * math.sqrt(rate * (1 - rate) / self.datasets)

    @property
    def check(self) -> str:
        """"yes" within the simulation's error of the stated level, else "too narrow" (a claim the
        intervals do not keep) or "too wide" (runs spent on width the level does not ask for); an A/A
        FAIL share beyond its limit, "false FAILs"."""
        if self.false_fail is not None and self.false_fail > self.fail_limit:
            return "false FAILs"
        if self.claim is not None:
            return "yes"
        if self.coverage < self.nominal - self.tolerance:
            return "too narrow"
        if self.coverage > self.nominal + self.tolerance:
            return "too wide"
        return "yes"

    @property
    def holds(self) -> bool:
        """Keeps its claim (coverage at least the stated level within error, A/A FAILs at most the rate
        allowed) and prints its point inside its interval; a too-wide row holds, wastefully."""
        return self.check in ("yes", "too wide") and self.point_inside == 1.0


def _noise(rng, n: int, spread: float, modes: bool) -> np.ndarray:
    e = rng.normal(0, spread, n)
    return e - MODES_GAP * (rng.random(n) < 1 / 3) if modes else e


def _count(name: str, scenario: str, draws, nominal: float) -> Row:
    """``draws``: (lower, upper, point, truth[, the level the interval states]) per data set."""
    covered = inside = missing = 0
    n = 0
    stated = []
    for lower, upper, point, truth, *level in draws:
        n += 1
        stated.append(level[0] if level and level[0] is not None else nominal)
        if lower is None:
            missing += 1
            continue
        covered += lower <= truth <= upper
        inside += lower <= point <= upper
    return Row(name, scenario, n, covered / n, float(np.mean(stated)), inside / max(n - missing, 1), missing)


# --- rank intervals --------------------------------------------------------------------------------

def rank_sum(rng, datasets: int, confidence: float, runs: int = 7, noisy: bool = False, modes: bool = False):
    """Independent runs, one batch (solo): the Mann-Whitney inversion of the ratio."""
    for _ in range(datasets):
        b = np.exp(_noise(rng, runs, NOISE, modes))
        c = TRUE_RATIO * np.exp(_noise(rng, runs, NOISE * (NOISY if noisy else 1), modes))
        iv = intervals.ratio_interval(b, c, confidence)
        yield iv.lower, iv.upper, iv.estimate, TRUE_RATIO, iv.coverage


def van_elteren(rng, datasets: int, confidence: float, batches: int = 3, runs: int = 3, modes: bool = False):
    """Several batches, each with a shift both sides share: the stratified inversion."""
    for _ in range(datasets):
        strata = []
        for _ in range(batches):
            shift = rng.normal(0, BATCH)
            strata.append((np.exp(shift + _noise(rng, runs, NOISE, modes)),
                           TRUE_RATIO * np.exp(shift + _noise(rng, runs, NOISE, modes))))
        iv = intervals.ratio_interval(np.array([]), np.array([]), confidence, strata)
        yield iv.lower, iv.upper, iv.estimate, TRUE_RATIO, iv.coverage


def signed_rank(rng, datasets: int, confidence: float, pairs: int = 9, slot: float = SLOT, cpu: float = 0.0,
                first: float = 0.0, modes: bool = False):
    """Pairs: each pair's slot shared by its two runs (``slot``); ``cpu``: the pace of the CPU a side
    had (two-CPU pairs, CPUs swapped every pair); ``first``: what going first in a pair in turns is
    worth, the order drawn at random."""
    for _ in range(datasets):
        blocks_ = []
        for k in range(pairs):
            shared = rng.normal(0, slot)
            pace = cpu * (1 if k % 2 else -1)
            order = first * (1 if rng.random() < 0.5 else -1)
            blocks_.append(([math.exp(shared + pace + order + _noise(rng, 1, NOISE, modes)[0])],
                            [TRUE_RATIO * math.exp(shared - pace - order + _noise(rng, 1, NOISE, modes)[0])]))
        iv = intervals.ratio_interval(np.array([]), np.array([]), confidence, blocks_)
        yield iv.lower, iv.upper, iv.estimate, TRUE_RATIO, iv.coverage


def paired_difference(rng, datasets: int, confidence: float, pairs: int = 9):
    """The ledger's and the attribution's change in ms of a phase, runs in pairs (Hodges-Lehmann of the
    paired differences); a phase of 2 ms that loses 0.3 ms, the slot multiplying both runs."""
    for _ in range(datasets):
        slots = np.exp(rng.normal(0, SLOT, pairs))
        b = 2.0 * slots * np.exp(rng.normal(0, NOISE, pairs))
        c = 1.7 * slots * np.exp(rng.normal(0, NOISE, pairs))
        iv = intervals.difference_interval(b, c, confidence, [([x], [y]) for x, y in zip(b, c)])
        yield iv.lower, iv.upper, iv.estimate, -0.3 * float(np.mean(slots)), iv.coverage


# --- the intra-block fit ---------------------------------------------------------------------------

def round_robin(sides: list[str], r: int) -> list[tuple[str, str]]:
    """Round r of the plain circle method: the first side fixed, the others rotated; with an odd count
    one side sits the round out. Not the runner's schedule (mbaphases.run.design.pairs_of_round also
    pairs the side left over with the baseline): the study needs only a connected design, and the
    statistics import nothing outside them."""
    ring = list(sides) + ([None] if len(sides) % 2 else [])
    rest = ring[1:]
    k = r % len(rest)
    ring = [ring[0], *rest[-k:], *rest[:-k]] if k else ring
    n = len(ring)
    return [(ring[i], ring[n - 1 - i]) for i in range(n // 2) if ring[i] is not None and ring[n - 1 - i] is not None]


def _round_robin_rows(rng, levels: dict[str, float], rounds: int, spread: dict[str, float], cpu: float,
                      modes: bool) -> list[tuple]:
    rows = []
    for r in range(rounds):
        for p, (x, y) in enumerate(round_robin(list(levels), r)):
            shared = rng.normal(0, SLOT)
            for side, cpu_index in ((x, r % 2), (y, 1 - r % 2)):
                value = levels[side] + shared + cpu * cpu_index + _noise(rng, 1, spread[side], modes)[0]
                rows.append((side, f"r{r}p{p}", math.exp(value), cpu_index if cpu else None))
    return rows


def intra_block(rng, datasets: int, confidence: float, sides: int = 5, rounds: int = 4, cpu: float = 0.0,
                noisy: bool = False, modes: bool = False, aa: bool = False, cases: int = 4):
    """Round-robin pairs through the fit; a batch of ``cases`` cases whose fits share each side's
    noisiness (as a report's do); the first case's contrast counts. ``noisy``: the compared
    candidate NOISY times noisier in every case."""
    names = [f"s{k}" for k in range(sides)]
    levels = {s: (0.0 if aa or k != 1 else math.log(TRUE_RATIO)) for k, s in enumerate(names)}
    spread = {s: NOISE * (NOISY if noisy and k == 1 else 1) for k, s in enumerate(names)}
    for _ in range(datasets):
        fits = {k: blocks.fit(_round_robin_rows(rng, levels, rounds, spread, cpu, modes)) for k in range(cases)}
        fits = {k: f for k, f in fits.items() if f is not None}
        blocks.share_noisiness(fits)
        ct = blocks.contrast(fits[0], "s0", "s1", confidence) if 0 in fits else None
        truth = 1.0 if aa else TRUE_RATIO
        yield (None, None, None, truth) if ct is None else (ct.lower, ct.upper, ct.estimate, truth)


def additivity(rng, datasets: int, confidence: float, rounds: int = 4):
    """Round-robin pairs of a reference, two single optimizations and their combination whose gains
    add up in ratio (so in ms they interact by the product term): the interaction through the fit."""
    gains = {"ref": 0.0, "a": math.log(0.9), "b": math.log(0.8), "ab": math.log(0.9 * 0.8)}
    base = 10.0
    truth = base * ((0.72 - 1) - (0.9 - 1) - (0.8 - 1))
    for _ in range(datasets):
        f = blocks.fit(_round_robin_rows(rng, gains, rounds, dict.fromkeys(gains, NOISE), 0.0, False))
        found = blocks.interaction(f, "ref", "ab", ["a", "b"], base, confidence) if f else None
        yield (None, None, None, truth) if found is None else (found.lower, found.upper, found.estimate, truth)


# --- the bootstrap of shares -----------------------------------------------------------------------

def shares(rng, datasets: int, confidence: float, pairs: int = 9):
    """Three parts of a change, runs in pairs sharing their slot (the attribution's shares): the first
    part's share of a change of -1.0 ms is 0.6."""
    means = np.array([2.0, 3.0, 1.0])
    change = np.array([-0.6, -0.3, -0.1])
    for _ in range(datasets):
        slots = np.exp(rng.normal(0, SLOT, (pairs, 1)))
        b = means * slots * np.exp(rng.normal(0, NOISE, (pairs, 3)))
        c = (means + change) * slots * np.exp(rng.normal(0, NOISE, (pairs, 3)))

        def share(drawn):
            delta = np.mean(drawn[1] - drawn[0], axis=1)
            return delta / delta.sum(axis=1, keepdims=True)
        point, lower, upper = intervals.bootstrap_pairs(b, c, share, confidence, resamples=1000,
                                                        seed=int(rng.integers(1 << 30)))[0]
        truth = float((change[0] * slots.mean()) / (change * slots.mean()).sum())
        yield lower, upper, point, truth


# --- a family's marks ------------------------------------------------------------------------------

def marks_fdp(rng, datasets: int, confidence: float, cases: int = 6, parts: int = 5, pairs: int = 9) -> float:
    """A report's family: ``cases`` cases of ``parts`` parts each, the parts of one run sharing that
    run's pace (as a report's phases share their runs: positively dependent changes), the first part
    of every case 10% faster in the candidate, the others unchanged: the mean false discovery
    proportion of the selection (the share of selected changes that did not move)."""
    proportions = []
    for _ in range(datasets):
        p, real = [], []
        for _ in range(cases):
            slots = rng.normal(0, SLOT, pairs)
            pace_b, pace_c = rng.normal(0, NOISE, pairs), rng.normal(0, NOISE, pairs)  # a run's own pace
            for k in range(parts):
                b = np.exp(slots + pace_b + rng.normal(0, NOISE, pairs))
                c = np.exp(slots + pace_c + (math.log(0.9) if k == 0 else 0.0) + rng.normal(0, NOISE, pairs))
                p.append(intervals.change_p([([x], [y]) for x, y in zip(b, c)]))
                real.append(k == 0)
        selected = intervals.family_marks(p, confidence).selected
        chosen = sum(selected)
        proportions.append(sum(s and not r for s, r in zip(selected, real)) / chosen if chosen else 0.0)
    return float(np.mean(proportions))


def false_fail(rows) -> float:
    """Of A/A draws (truth 1): the share whose interval lies wholly below 1 (a FAIL at threshold 1)."""
    rows = [r for r in rows if r[0] is not None]
    return sum(upper < 1.0 for _, upper, *_ in rows) / max(len(rows), 1)


# --- the turn bias and the runner's schedule --------------------------------------------------------

BIAS = -0.035  # the turn bias of the simulated class (measured: the demo at two CPUs a run)
BIAS_BETWEEN = 0.01  # the spread of the true biases between (candidate, case)s
FIRST = 0.01  # what taking the first turn is worth (the fit's position term takes it out)
DRIFT = 0.02  # the host's drift a round, shared by a pair's two runs
LOOKS = (3, 4, 5)  # runs a side at the looks of the main job (rounds 3 to 5)


def bias_study(rng, candidates: int = 2, cases: int = 7, slots: int = 6,
               spread_level: float = intervals.PREDICTION_SPREAD_LEVEL) -> intervals.BiasBound:
    """A simulated turn-bias study (scripts/turn_bias.py): each (candidate, case)'s bias is the mean of
    ``slots`` paired slot differences whose spread is the alone design's (5-20% a slot, log scale)."""
    estimates, ses = [], []
    for _ in range(candidates * cases):
        diffs = rng.normal(BIAS + rng.normal(0, BIAS_BETWEEN), rng.uniform(0.05, 0.20), slots)
        estimates.append(float(diffs.mean()))
        ses.append(float(diffs.std(ddof=1) / math.sqrt(slots)))
    return intervals.bias_bound(estimates, ses, spread_level=spread_level)


def turn_bias_prediction(rng, datasets: int, confidence: float, between: float = BIAS_BETWEEN):
    """The correction's prediction: a study of 2 candidates x 7 cases predicts a new candidate's case's
    bias (mean +- t(df) x prediction_se) as the gate uses it."""
    for _ in range(datasets):
        found = bias_study(rng)
        truth = BIAS + rng.normal(0, between)
        half = intervals.quantile(confidence, found.df) * found.prediction_se
        yield found.mean - half, found.mean + half, found.mean, truth


def _schedule_rows(rng, levels: dict[str, float], biases: dict[str, float], rounds: int) -> list[tuple]:
    """Round-robin pairs in turns as the runner takes them: each pair's slot shared (with the host's
    drift over the rounds), which side takes the first turn drawn, each side's turn bias in its runs."""
    rows = []
    for r in range(rounds):
        for p, (x, y) in enumerate(round_robin(list(levels), r)):
            shared = rng.normal(0, SLOT) + DRIFT * r
            first = x if rng.random() < 0.5 else y
            for side in (x, y):
                role = 0 if side == first else 1
                value = levels[side] + biases[side] + shared + FIRST * (role == 0) + rng.normal(0, NOISE)
                rows.append((side, f"r{r}p{p}", math.exp(value), 0, role))
    return rows


METHODS = ("corrected", "widened by the bound", "uncorrected")


def _looks_of_a_batch(rng, levels: dict[str, float], cases: int) -> tuple[intervals.BiasBound, list[dict]]:
    """One generated batch on the main job's schedule: the turn-bias study its gate is corrected by, and
    at each look (LOOKS) the fits of its ``cases`` cases sharing each side's noisiness (as a report's)."""
    found = bias_study(rng)
    per_case = [_schedule_rows(rng, levels, {s: (0.0 if s == "s0" else BIAS + rng.normal(0, BIAS_BETWEEN))
                                             for s in levels}, LOOKS[-1]) for _ in range(cases)]
    fits_at = []
    for runs in LOOKS:
        fits = {k: blocks.fit([r for r in rows if int(r[1][1:].split("p")[0]) < runs])
                for k, rows in enumerate(per_case)}
        fits = {k: f for k, f in fits.items() if f is not None}
        blocks.share_noisiness(fits)
        fits_at.append(fits)
    return found, fits_at


def _gated(ct: blocks.Contrast, level: float, found: intervals.BiasBound, method: str) -> tuple[float, float, float]:
    """The gate's interval of one look by ``method``: the turn bias corrected (the suite's), the
    interval widened by the bias's whole bound on both sides (the suite's rule before), or as fitted."""
    if method == "corrected":
        c = intervals.correct_bias(ct.lower, ct.upper, ct.estimate, ct.df, level, found.mean, found.prediction_se,
                                   found.df)
        return c.lower, c.upper, c.estimate
    if method == "widened by the bound":
        return ct.lower * math.exp(-found.bound), ct.upper * math.exp(found.bound), ct.estimate
    return ct.lower, ct.upper, ct.estimate


def runner_schedule(rng, datasets: int, confidence: float, truth: float = TRUE_RATIO,
                    threshold: float = rules.DEFAULT_THRESHOLD, cases: int = 2, sides: int = 6):
    """The main job's program on generated data: 6 sides in round-robin pairs in turns, a turn bias in
    every candidate's runs, a look after rounds 3, 4 and 5 at the spending plan's levels, the first
    case's gate stopping at the look that decides it. Per data set, per method (METHODS): the interval
    of the look it stopped at and that look's level."""
    levels_of_looks = rules.look_levels(confidence, list(LOOKS))
    levels = {f"s{k}": (math.log(truth) if k == 1 else 0.0) for k in range(sides)}
    for _ in range(datasets):
        found, fits_at = _looks_of_a_batch(rng, levels, cases)
        looks = [fits.get(0) for fits in fits_at]
        out = {}
        for method in METHODS:
            chosen = None
            for f, level in zip(looks, levels_of_looks):
                ct = blocks.contrast(f, "s0", "s1", level) if f is not None else None
                if ct is None:
                    continue
                chosen = (*_gated(ct, level, found, method), level)
                if chosen[0] >= threshold or chosen[1] < threshold:
                    break
            out[method] = chosen
        yield out


def overall_aa(rng, datasets: int, confidence: float, cases: int = 7, sides: int = 6):
    """A/A at threshold 1 over ``cases`` cases on the runner's schedule, every case at the threshold:
    per data set, whether the candidate's verdict FAILs by the family rule (a case FAILs at
    1 - (1 - level) / cases, gate.verdict) and by the rule before it (any case FAILs at its own level),
    stopping at the look where the candidate is decided."""
    levels_of_looks = rules.look_levels(confidence, list(LOOKS))
    levels = {f"s{k}": 0.0 for k in range(sides)}
    for _ in range(datasets):
        found, fits_at = _looks_of_a_batch(rng, levels, cases)
        verdicts = {}
        for rule in ("family", "each case"):
            verdict = "INCONCLUSIVE"
            for fits, level in zip(fits_at, levels_of_looks):
                fail_level = 1 - (1 - level) / cases if rule == "family" else level
                own = [_gated(blocks.contrast(f, "s0", "s1", level), level, found, "corrected") for f in fits.values()]
                at_fail = [_gated(blocks.contrast(f, "s0", "s1", fail_level), fail_level, found, "corrected")
                           for f in fits.values()]
                if any(hi < 1.0 for _, hi, _ in at_fail):
                    verdict = "FAIL"
                elif all(lo >= 1.0 for lo, _, _ in own):
                    verdict = "PASS"
                if verdict != "INCONCLUSIVE":
                    break
            verdicts[rule] = verdict
        yield verdicts


def schedule_rows(datasets: int, confidence: float, seed: int) -> list[Row]:
    """The gate on the runner's schedule by each method (coverage of the alone truth by the stopping
    look's interval, against that look's level; A/A at threshold 1: the FAIL share), and the
    candidate's overall verdict in A/A over 7 cases."""
    rows = []
    for k, (scenario, truth, threshold) in enumerate((("main job's looks, turn bias -3.5%", TRUE_RATIO,
                                                       rules.DEFAULT_THRESHOLD),
                                                      ("A/A at threshold 1, turn bias -3.5%", 1.0, 1.0))):
        draws = list(runner_schedule(np.random.default_rng([seed, 100 + k]), datasets, confidence, truth, threshold))
        for method in METHODS:
            picked = [(*(d[method][:3] if d[method] else (None, None, None)), truth,
                       d[method][3] if d[method] else None) for d in draws]
            row = _count(f"gate, pairs in turns ({method})", scenario, picked, confidence)
            if truth == 1.0:
                row.false_fail = false_fail(picked)
            rows.append(row)
    overall = list(overall_aa(np.random.default_rng([seed, 200]), datasets, confidence))
    for rule in ("family", "each case"):
        fails = sum(v[rule] == "FAIL" for v in overall) / len(overall)
        name = ("overall verdict (FAIL at the family's level)" if rule == "family"
                else "overall verdict (FAIL if any case FAILs at its own level)")
        rows.append(Row(name, "A/A at threshold 1, 7 cases, main job's looks", len(overall), math.nan, confidence,
                        1.0, 0, fails, (1 - confidence) / 2))
    return rows


SCENARIOS = {
    # procedure, scenario -> the draws (given rng, data sets, confidence)
    ("rank-sum", "solo batch"): lambda rng, n, c: rank_sum(rng, n, c),
    ("rank-sum", "one noisy side"): lambda rng, n, c: rank_sum(rng, n, c, noisy=True),
    ("rank-sum", "two modes"): lambda rng, n, c: rank_sum(rng, n, c, modes=True),
    ("van Elteren strata", "3 batches, shared shifts"): lambda rng, n, c: van_elteren(rng, n, c),
    ("van Elteren strata", "two modes"): lambda rng, n, c: van_elteren(rng, n, c, modes=True),
    ("signed-rank", "two-CPU pairs"): lambda rng, n, c: signed_rank(rng, n, c, slot=NOISE, cpu=0.03),
    ("signed-rank", "pairs in turns"): lambda rng, n, c: signed_rank(rng, n, c),
    ("signed-rank", "turns, who goes first worth 2%"): lambda rng, n, c: signed_rank(rng, n, c, first=0.02),
    ("signed-rank", "turns, two modes"): lambda rng, n, c: signed_rank(rng, n, c, modes=True),
    ("intra-block", "pairs in turns"): lambda rng, n, c: intra_block(rng, n, c),
    ("intra-block", "one noisy side"): lambda rng, n, c: intra_block(rng, n, c, noisy=True),
    ("intra-block", "two modes"): lambda rng, n, c: intra_block(rng, n, c, modes=True),
    # the CPU term takes a degree of freedom: 6 rounds, where 4 leave the fit too few
    ("intra-block with CPU term", "two-CPU pairs, CPU 1 3% faster"):
        lambda rng, n, c: intra_block(rng, n, c, cpu=0.03, rounds=6),
    ("intra-block with CPU term", "one noisy side"): lambda rng, n, c: intra_block(rng, n, c, cpu=0.03, noisy=True,
                                                                                  rounds=6),
    ("ledger's change in ms", "pairs in turns"): lambda rng, n, c: paired_difference(rng, n, c),
    ("additivity (intra-block interaction)", "pairs in turns"): lambda rng, n, c: additivity(rng, n, c),
    ("share bootstrap", "pairs in turns"): lambda rng, n, c: shares(rng, n, c),
    ("turn-bias correction (random-effects prediction)", "2 candidates x 7 cases, biases 1% apart"):
        lambda rng, n, c: turn_bias_prediction(rng, n, c),
    ("turn-bias correction (random-effects prediction)", "2 candidates x 7 cases, one common bias"):
        lambda rng, n, c: turn_bias_prediction(rng, n, c, between=0.0),
}
AA = {
    ("rank-sum", "A/A solo"): lambda rng, n, c: rank_sum_aa(rng, n, c),
    ("signed-rank", "A/A in turns"): lambda rng, n, c: signed_rank_aa(rng, n, c),
    ("intra-block", "A/A round-robin"): lambda rng, n, c: intra_block(rng, n, c, aa=True),
}


def rank_sum_aa(rng, datasets: int, confidence: float, runs: int = 7):
    for b, c in ((np.exp(rng.normal(0, NOISE, runs)), np.exp(rng.normal(0, NOISE, runs))) for _ in range(datasets)):
        iv = intervals.ratio_interval(b, c, confidence)
        yield iv.lower, iv.upper, iv.estimate, 1.0, iv.coverage


def signed_rank_aa(rng, datasets: int, confidence: float, pairs: int = 9):
    for _ in range(datasets):
        slots = rng.normal(0, SLOT, pairs)
        pairs_ = [([math.exp(s + rng.normal(0, NOISE))], [math.exp(s + rng.normal(0, NOISE))]) for s in slots]
        iv = intervals.ratio_interval(np.array([]), np.array([]), confidence, pairs_)
        yield iv.lower, iv.upper, iv.estimate, 1.0, iv.coverage


def study(datasets: int = 300, confidence: float = 0.90, seed: int = SEED, only=None,
          schedule_datasets: int | None = None) -> list[Row]:
    """Every procedure x scenario (``only``: a subset of their keys), each on its own seeded stream,
    then the runner's schedule (``schedule_datasets`` data sets, default ``datasets``; 0: none)."""
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fits of generated data warn of the blocks' expected rank
        for k, (key, draw) in enumerate({**SCENARIOS, **AA}.items()):
            if only is not None and key not in only:
                continue
            draws = list(draw(np.random.default_rng([seed, k]), datasets, confidence))
            row = _count(*key, draws, confidence)
            if key in AA:
                row.false_fail = false_fail(draws)
            rows.append(row)
        n = datasets if schedule_datasets is None else schedule_datasets
        if n and only is None:
            rows += schedule_rows(n, confidence, seed)
    return rows


def markdown(rows: list[Row], fdp: float, fdp_q: float, fdp_datasets: int) -> str:
    lines = ["| procedure | scenario | data sets | coverage | stated level | within error (± Monte Carlo) | "
             "point inside | A/A false FAIL |",
             "|---|---|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        coverage = "" if math.isnan(r.coverage) else f"{r.coverage:.3f}"
        error = "" if math.isnan(r.coverage) else f" (±{r.tolerance:.3f})"
        lines.append(f"| {r.procedure} | {r.scenario} | {r.datasets} | {coverage} | {r.nominal:.3f} | "
                     f"{r.check}{error} | {r.point_inside:.0%} | "
                     + (f"{r.false_fail:.3f} (at most {r.fail_rate:.2f} + error: {r.fail_limit:.3f})"
                        if r.false_fail is not None else "")
                     + " |")
    lines.append(f"| marks (Benjamini-Hochberg) | 6 cases x 5 parts sharing their runs, 6 real | {fdp_datasets} | "
                 "mean false discovery "
                 f"proportion {fdp:.3f} | q = {fdp_q:.2f} | {'yes' if fdp <= fdp_q else 'NO'} | | |")
    return "\n".join(lines) + "\n"
