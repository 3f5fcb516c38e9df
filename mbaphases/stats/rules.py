"""The rules that decide from the figures: the defaults every decision starts from, the error
split over repeated looks, the rank test beside the gate's interval, the three-answer
equivalence test of additivity, and the dispersion rules (WIDE, DRIFT, TRANSIENT, MODES)."""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize
from scipy.stats import mannwhitneyu, norm

from mbaphases.stats import intervals

# the defaults of every decision (pins [gate] threshold and confidence override them)
DEFAULT_CONFIDENCE = 0.90
DEFAULT_THRESHOLD = 0.90  # the gate: the candidate at least 90% of the baseline's throughput
RANK_TEST_MIN_RUNS = 5  # below, a rank test cannot reach the usual levels: no p-value is shown
# the measured window's first third may differ this much from its last before it is not steady
# (slower: warmup too short; faster: the episodes had not yet reached their resets)
STEADY_LIMIT = 0.05
# two modes: each holds at least this many runs, and the gap between them is this many times
# wider than either mode's own spread and at least MODES_MIN_GAP (log scale, about 10%)
MODES_MIN_RUNS = 2
MODES_SEPARATION = 3.0
MODES_MIN_GAP = 0.1


def split_confidence(confidence: float, looks: int) -> float:
    """Bonferroni: the error 1 - confidence split evenly over ``looks`` planned decisions, so that
    all of them hold together at ``confidence`` (the report's fallback where looks of several
    batches are pooled, and find's bisection steps)."""
    return 1 - (1 - confidence) / looks


SPENDING = "Lan-DeMets Pocock-type"


def spent(error: float, fraction: np.ndarray) -> np.ndarray:
    """Lan and DeMets' Pocock-type spending function: the error spent by information ``fraction``,
    error x ln(1 + (e - 1) t). Pocock's shape spends early: a batch's time is set by how soon its
    cases decide, most are far from the threshold and decide at the first look that can, and one at
    the threshold decides at none (O'Brien-Fleming's shape saves its error for the last look)."""
    return error * np.log1p((math.e - 1) * np.clip(fraction, 0.0, 1.0))


def look_levels(confidence: float, information: list[float]) -> list[float]:
    return list(_look_levels(float(confidence), tuple(float(x) for x in information)))


@functools.cache
def _look_levels(confidence: float, information: tuple[float, ...]) -> tuple[float, ...]:
    """Per look, the confidence of its repeated confidence interval (Jennison and Turnbull), so that
    every look's interval covers together at ``confidence``: the error is spent by information (runs a
    side at the look over the last look's) along ``spent``, each look's boundary c_k solving
    P(|Z_j| < c_j for j < k, |Z_k| >= c_k) = spent(t_k) - spent(t_{k-1}), the looks' estimates the
    partial sums of independent increments (correlation sqrt(t_i / t_j)). The probabilities are
    Armitage, McPherson and Rowe's recursive integration on a grid (deterministic; scipy's normal).
    The looks' estimates are correlated about 0.9, so the levels sit well below Bonferroni's (three
    looks at a nominal 90%: 0.929, 0.954, 0.956 against 0.967 each)."""
    info = np.asarray(information, dtype=float) / float(information[-1])
    spend = spent(1 - confidence, info)
    grid = np.linspace(-8.0, 8.0, 2401)  # the partial sum S_k (its variance at most 1: the last look's)
    step = grid[1] - grid[0]
    density = None  # of S_{k-1} on the paths that have not crossed yet
    levels = []
    for k, t in enumerate(info):
        budget = spend[k] - (spend[k - 1] if k else 0.0)
        increment = t - (info[k - 1] if k else 0.0)
        if k == 0:
            c = float(norm.isf(budget / 2))
        elif budget <= 0 or increment <= 0:
            c = math.inf
        else:
            def excess(c, density=density, increment=increment, t=t, budget=budget):
                edge = c * math.sqrt(t)
                # P(|S_k| >= edge | S_{k-1} = u) for each grid point u, weighted by the density
                far = norm.sf((edge - grid) / math.sqrt(increment)) + norm.cdf((-edge - grid) / math.sqrt(increment))
                return float((density * far).sum() * step) - budget
            c = float(optimize.brentq(excess, 0.1, 12.0, xtol=1e-9))
        levels.append(float(2 * norm.cdf(c) - 1) if math.isfinite(c) else 1.0)
        inside = np.abs(grid) < c * math.sqrt(t)
        if k == 0:
            density = norm.pdf(grid / math.sqrt(t)) / math.sqrt(t) * inside
        else:
            kernel = norm.pdf((grid[:, None] - grid[None, :]) / math.sqrt(increment)) / math.sqrt(increment)
            density = (kernel @ density) * step * inside
    return tuple(levels)


def deciding_looks(confidence: float, sizes: list[int], can_decide) -> dict[int, float]:
    """Look index -> its level, over the planned looks (``sizes``: runs a side at each) that can
    decide at all: a look with too few runs for the design's interval at its level decides nothing
    and spends no error, its share left to the looks after it. ``can_decide(runs, level)``: whether
    the design's interval exists there."""
    kept = list(range(len(sizes)))
    while kept:
        levels = look_levels(confidence, [sizes[i] for i in kept])
        failing = [i for i, level in zip(kept, levels) if not can_decide(sizes[i], level)]
        if not failing:
            return dict(zip(kept, levels))
        # the earliest first: without it the later looks' levels fall, and they may then decide
        kept.remove(failing[0])
    return {}


def rank_test_p(b: np.ndarray, c: np.ndarray, threshold: float) -> float | None:
    """One-sided Mann-Whitney: P(candidate >= threshold x baseline) is not lower."""
    if min(len(b), len(c)) < RANK_TEST_MIN_RUNS:
        return None
    return float(mannwhitneyu(c, threshold * b, alternative="less").pvalue)


def decide_equivalence(point: float, lower: float | None, upper: float | None, margin: float,
                       runs: int) -> tuple[str, int | None]:
    """An equivalence test with three answers on the interval of an interaction: inside
    +- margin adds up, wholly beyond it does not, otherwise undetermined (with the runs per side
    an interval of this spread would need)."""
    if lower is None:
        return "undetermined", None
    if -margin <= lower and upper <= margin:
        return "adds up", None
    if lower > margin or upper < -margin:
        return "does not add up", None
    half = (upper - lower) / 2
    # the nearer decision: inside the margin (adds up) or beyond it (does not)
    distance = abs(margin - abs(point))
    return "undetermined", intervals.runs_to_decide(half, distance, runs)


def spread(x: np.ndarray) -> tuple[float, float | None, float | None]:
    """(median, range over the median, population CV) of per-run values."""
    med = float(np.median(x))
    rng = float((x.max() - x.min()) / med) if med else None
    cv = float(x.std() / x.mean()) if x.mean() else None
    return med, rng, cv


def is_wide(range_pct: float | None, limit: float) -> bool:
    return bool(range_pct is not None and range_pct > limit)


def is_transient(first_last: float | None) -> bool:
    return bool(first_last is not None and abs(first_last - 1) > STEADY_LIMIT)


def drifts(groups: dict[str, list[float]]) -> bool:
    """DRIFT: two batches whose [min, max] do not overlap and whose medians differ by more than
    the larger within-batch range: the same code measuring differently in another batch."""
    stats = {k: (float(np.median(g)), min(g), max(g)) for k, g in groups.items()}
    names = sorted(stats)
    for i, a in enumerate(names):
        for other in names[i + 1:]:
            ma, lo_a, hi_a = stats[a]
            mb, lo_b, hi_b = stats[other]
            if (hi_a < lo_b or hi_b < lo_a) and abs(ma - mb) > max(hi_a - lo_a, hi_b - lo_b):
                return True
    return False


def two_modes(values: dict[str, float]) -> tuple[list[str], list[str]] | None:
    """MODES: the runs (name -> per-run value) fall into two groups far apart for their own spread
    (a run in one state or the other, such as a phase taking 4-8 ms a step in some runs and 16-23 in
    others), or None. The split is at the widest gap of the sorted log values; it counts when each
    side holds at least MODES_MIN_RUNS runs and the gap is at least MODES_SEPARATION times either
    group's standard deviation and at least MODES_MIN_GAP. Returns (runs of the slower-valued mode,
    runs of the higher-valued one)."""
    named = sorted(((float(np.log(v)), k) for k, v in values.items() if v > 0 and np.isfinite(v)))
    if len(named) < 2 * MODES_MIN_RUNS:
        return None
    logs = np.array([v for v, _ in named])
    gaps = np.diff(logs)
    inner = gaps[MODES_MIN_RUNS - 1: len(gaps) - MODES_MIN_RUNS + 1]
    cut = MODES_MIN_RUNS + int(np.argmax(inner))
    gap = float(logs[cut] - logs[cut - 1])
    low, high = logs[:cut], logs[cut:]
    if gap < MODES_MIN_GAP or gap < MODES_SEPARATION * max(low.std(ddof=1), high.std(ddof=1)):
        return None
    return [k for _, k in named[:cut]], [k for _, k in named[cut:]]
