"""The rules that decide from the figures: the defaults every decision starts from, the error
split over repeated looks, the rank test beside the gate's interval, the three-answer
equivalence test of additivity, and the dispersion rules (WIDE, DRIFT, TRANSIENT, MODES)."""
from __future__ import annotations

import numpy as np
from scipy.stats import mannwhitneyu

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
    """Bonferroni: the error 1 - confidence split evenly over ``looks`` planned decisions (or
    looks at the data), so that all of them hold together at ``confidence``."""
    return 1 - (1 - confidence) / looks


def split_over_deciding_looks(confidence: float, sizes: list[int], can_decide) -> tuple[float, int]:
    """Bonferroni over the looks that can decide: a look with too few runs for an interval at its
    confidence decides nothing and spends no error. ``sizes``: the runs a side at each planned look;
    ``can_decide(runs, confidence)``: whether the design's interval exists there. Returns the
    per-look confidence and the count k the error is split over: the smallest k at which at most k
    looks can give an interval at 1 - (1 - confidence) / k, so the looks that spend error spend at
    most 1 - confidence together (k = every look always qualifies: the plain split)."""
    for k in range(1, len(sizes) + 1):
        per_look = split_confidence(confidence, k)
        if sum(1 for n in sizes if can_decide(n, per_look)) <= k:
            return per_look, k
    return split_confidence(confidence, max(len(sizes), 1)), max(len(sizes), 1)


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
