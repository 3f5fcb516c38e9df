"""The distribution-free confidence interval for the throughput ratio.

Inverting the Mann-Whitney test gives the Hodges-Lehmann interval for a shift:
with m baseline and n candidate runs, sort the m x n pairwise log ratios
log(c_j / b_i); the k-th smallest to the k-th largest cover the true log ratio
with confidence 1 - 2 P(U <= k - 1), U the Mann-Whitney statistic under the
null (exact below 20 runs a side, normal approximation above). At 3 vs 3, k = 1
gives [min c / max b, max c / min b] at exactly 90%: the interval rule of the
seed; with more runs the same confidence uses inner order statistics, so the
interval narrows instead of widening.

Several batches are blocks (strata): the same inversion on van Elteren's
stratified statistic T = sum_s w_s U_s, w_s = 1 / (m_s + n_s + 1), each stratum
comparing only its own runs, so a shift between batches that both sides share
neither widens nor biases the interval. Exact (the strata's U distributions
convolved) where the counts allow, normal otherwise. One stratum is the rule
above, unchanged.

Also here: the same intervals for a difference in ms (ledger, attribution),
and a stratified bootstrap over runs for what no rank inversion gives (a share
of a change, an interaction of several sides' changes).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy import optimize, stats
from scipy.stats import false_discovery_control, norm

EXACT_BELOW = 20


@cache
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """Number of arrangements giving U = 0..m*n (exact integers)."""
    if m == 0 or n == 0:
        return (1,)
    # recursion on the largest observation: it is a candidate (adds m to U) or a baseline run
    a, b = _u_counts(m, n - 1), _u_counts(m - 1, n)
    out = [0] * (m * n + 1)
    for u, c in enumerate(a):
        out[u + m] += c
    for u, c in enumerate(b):
        out[u] += c
    return tuple(out)


def u_cdf(k: int, m: int, n: int) -> float:
    """P(U <= k) under the null of no shift."""
    if k < 0:
        return 0.0
    if min(m, n) < EXACT_BELOW:
        counts = _u_counts(m, n)
        return sum(counts[: k + 1]) / math.comb(m + n, m)
    mu, sigma = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)
    return 0.5 * math.erfc(-((k + 0.5 - mu) / sigma) / math.sqrt(2))


def order_index(m: int, n: int, confidence: float) -> tuple[int | None, float | None]:
    """The largest k whose interval still has at least ``confidence``, and its exact coverage."""
    best = None
    for k in range(1, m * n // 2 + 1):
        coverage = 1 - 2 * u_cdf(k - 1, m, n)
        if coverage + 1e-12 < confidence:
            break
        best = (k, coverage)
    return best if best else (None, None)


@dataclass
class RatioInterval:
    lower: float | None  # ratio (candidate / baseline), not log; a difference for shift intervals
    upper: float | None
    estimate: float  # Hodges-Lehmann: exp(median of the log ratios)
    k: int | None  # the order statistic (one stratum); None with several strata
    coverage: float | None  # the exact confidence of [lower, upper] (nominal where normal)
    m: int
    n: int
    strata: int = 1
    method: str = "exact"
    ratio: bool = True  # False: an interval of a difference (ms)

    @property
    def half_width(self) -> float | None:
        """Smallest detectable change: half the interval's relative width (ratios) or half its
        width (differences)."""
        if self.lower is None:
            return None
        if not self.ratio:
            return (self.upper - self.lower) / 2
        return math.sqrt(self.upper / self.lower) - 1

    def contains(self, x: float) -> bool | None:
        return None if self.lower is None else self.lower <= x <= self.upper


def ratio_interval(baseline: np.ndarray, candidate: np.ndarray, confidence: float,
                   blocks: list[tuple] | None = None) -> RatioInterval:
    """The interval of candidate / baseline; ``blocks`` ([(baseline, candidate)] per batch)
    stratifies it. One block is the same as none."""
    return _shift(blocks or [(baseline, candidate)], confidence, log=True)


def difference_interval(baseline: np.ndarray, candidate: np.ndarray, confidence: float,
                        blocks: list[tuple] | None = None) -> RatioInterval:
    """The interval of the shift candidate - baseline (e.g. ms per vector step): Hodges-Lehmann
    of the pairwise differences, the same inversion as the ratio's."""
    return _shift(blocks or [(baseline, candidate)], confidence, log=False)


def _diffs(b, c, log: bool) -> np.ndarray:
    b, c = np.asarray(b, dtype=float), np.asarray(c, dtype=float)
    if log:
        b, c = np.log(b), np.log(c)
    return (c[None, :] - b[:, None]).ravel()


def _shift(blocks: list[tuple], confidence: float, log: bool) -> RatioInterval:
    back = np.exp if log else (lambda x: x)
    blocks = [(np.asarray(b, dtype=float), np.asarray(c, dtype=float)) for b, c in blocks if len(b) and len(c)]
    m, n = sum(len(b) for b, _ in blocks), sum(len(c) for _, c in blocks)
    if not blocks:
        return RatioInterval(None, None, math.nan, None, None, 0, 0, 0, ratio=log)
    if len(blocks) == 1:
        (b, c), = blocks
        d = np.sort(_diffs(b, c, log))
        k, coverage = order_index(len(b), len(c), confidence)
        est = float(back(np.median(d)))
        if k is None:
            return RatioInterval(None, None, est, None, None, m, n, ratio=log)
        method = "exact" if min(len(b), len(c)) < EXACT_BELOW else "normal"
        return RatioInterval(float(back(d[k - 1])), float(back(d[-k])), est, k, coverage, m, n, 1, method, log)
    if all(len(b) == 1 and len(c) == 1 for b, c in blocks):
        return _paired_shift(blocks, confidence, log)
    sizes = [(len(b), len(c)) for b, c in blocks]
    weights = van_elteren_weights(sizes)
    d = np.concatenate([_diffs(b, c, log) for b, c in blocks])
    w = np.concatenate([np.full(mb * nc, wt, dtype=float) for (mb, nc), wt in zip(sizes, weights)])
    order = np.argsort(d, kind="stable")
    d, w = d[order], w[order]
    total = float(w.sum())
    after = total - np.cumsum(w)  # T(delta) just above each sorted difference
    mean = total / 2
    eps = 1e-9 * total
    est = float(back((d[np.argmax(after <= mean + eps)] + d[np.argmax(after < mean - eps)]) / 2))
    accept = stratified_acceptance(sizes, weights, confidence)
    if accept is None:
        return RatioInterval(None, None, est, None, None, m, n, len(blocks), ratio=log)
    t_lo, coverage, method = accept
    t_hi = total - t_lo  # the null distribution is symmetric about total / 2
    lower = d[np.argmax(after <= t_hi + eps)]
    upper = d[np.argmax(after < t_lo - eps)]
    return RatioInterval(float(back(lower)), float(back(upper)), est, None, coverage, m, n, len(blocks), method, log)


@cache
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """Number of the 2^n sign assignments giving W+ = 0..n(n+1)/2 (exact integers)."""
    counts = [1]
    for rank in range(1, n + 1):
        grown = counts + [0] * rank
        for w, c in enumerate(counts):
            grown[w + rank] += c
        counts = grown
    return tuple(counts)


def signed_rank_cdf(k: int, n: int) -> float:
    """P(W+ <= k) under the null of no shift (Wilcoxon's signed-rank statistic over n pairs)."""
    if k < 0:
        return 0.0
    counts = _signed_rank_counts(n)
    return sum(counts[: k + 1]) / 2 ** n


def _paired_shift(blocks: list[tuple], confidence: float, log: bool) -> RatioInterval:
    """Blocks of one run a side (pairs): the Wilcoxon signed-rank interval of the paired
    differences (Tukey's: the k-th smallest to the k-th largest Walsh average), which uses the
    sizes of the differences where van Elteren's statistic over 1-vs-1 strata is the sign test."""
    back = np.exp if log else (lambda x: x)
    d = np.concatenate([_diffs(b, c, log) for b, c in blocks])
    n = len(d)
    walsh = np.sort(np.array([(d[i] + d[j]) / 2 for i in range(n) for j in range(i, n)]))
    est = float(back(np.median(walsh)))
    best = None
    for k in range(1, len(walsh) // 2 + 1):
        coverage = 1 - 2 * signed_rank_cdf(k - 1, n)
        if coverage + 1e-12 < confidence:
            break
        best = (k, coverage)
    if best is None:
        return RatioInterval(None, None, est, None, None, n, n, n, "signed-rank exact", log)
    k, coverage = best
    return RatioInterval(float(back(walsh[k - 1])), float(back(walsh[-k])), est, k, coverage, n, n, n,
                         "signed-rank exact", log)


def van_elteren_weights(sizes: list[tuple[int, int]]) -> list[int]:
    """w_s = 1 / (m_s + n_s + 1), scaled to integers (a common multiple) so the exact null
    distribution is one of integers; scaling does not change the test."""
    denominators = [mb + nc + 1 for mb, nc in sizes]
    lcm = math.lcm(*denominators)
    return [lcm // dn for dn in denominators]


EXACT_SUPPORT_MAX = 2_000_000


def stratified_null(sizes: list[tuple[int, int]], weights: list[int]) -> np.ndarray | None:
    """P(T = t) for t = 0..sum w_s m_s n_s under no shift, T = sum_s w_s U_s with the
    strata independent (None where too large for the exact computation)."""
    support = sum(wt * mb * nc for (mb, nc), wt in zip(sizes, weights))
    if support > EXACT_SUPPORT_MAX or any(min(s) >= EXACT_BELOW for s in sizes):
        return None
    dist = np.ones(1)
    for (mb, nc), wt in zip(sizes, weights):
        counts = np.array(_u_counts(mb, nc), dtype=float) / math.comb(mb + nc, mb)
        scaled = np.zeros(wt * mb * nc + 1)
        scaled[::wt] = counts
        dist = np.convolve(dist, scaled)
    return dist


def _null_moments(sizes, weights) -> tuple[float, float]:
    """Mean and standard deviation of T = sum_s w_s U_s under no shift (its normal approximation)."""
    mean = sum(wt * mb * nc for (mb, nc), wt in zip(sizes, weights)) / 2
    sd = math.sqrt(sum(wt * wt * mb * nc * (mb + nc + 1) / 12 for (mb, nc), wt in zip(sizes, weights)))
    return mean, sd


def stratified_acceptance(sizes, weights, confidence: float) -> tuple[float, float, str] | None:
    """(t_lo, coverage, method): T in [t_lo, total - t_lo] is accepted, with coverage
    1 - 2 P(T < t_lo) >= confidence, t_lo as large as that allows (> 0: else no interval)."""
    dist = stratified_null(sizes, weights)
    if dist is not None:
        below = np.concatenate([[0.0], np.cumsum(dist)[:-1]])  # P(T < t)
        ok = np.nonzero((dist > 0) & (1 - 2 * below + 1e-12 >= confidence))[0]
        ok = ok[ok > 0]
        if not len(ok):
            return None
        t_lo = int(ok.max())
        return float(t_lo), float(1 - 2 * below[t_lo]), "exact"

    mean, sd = _null_moments(sizes, weights)
    t_lo = mean - norm.ppf(0.5 + confidence / 2) * sd
    return (t_lo, confidence, "normal") if t_lo > 0 else None


def stratified_p_less(blocks: list[tuple], threshold: float) -> float | None:
    """One-sided stratified rank test that candidate >= threshold x baseline is not lower
    (van Elteren; ties count half): the p-value of the observed T at that shift."""
    blocks = [(np.asarray(b, dtype=float), np.asarray(c, dtype=float)) for b, c in blocks if len(b) and len(c)]
    if not blocks:
        return None
    if all(len(b) == 1 and len(c) == 1 for b, c in blocks):
        # pairs: the signed-rank test of the paired log ratios against log(threshold)
        d = np.array([math.log(c[0] / (threshold * b[0])) for b, c in blocks])
        return float(stats.wilcoxon(d, alternative="less", method="exact").pvalue) if np.any(d != 0) else None
    sizes = [(len(b), len(c)) for b, c in blocks]
    weights = van_elteren_weights(sizes)
    t = 0.0
    for (b, c), wt in zip(blocks, weights):
        diff = c[None, :] - threshold * b[:, None]
        t += wt * (float((diff > 0).sum()) + 0.5 * float((diff == 0).sum()))
    dist = stratified_null(sizes, weights)
    if dist is not None:
        return float(dist[: int(math.floor(t + 1e-9)) + 1].sum())

    mean, sd = _null_moments(sizes, weights)
    return float(norm.cdf((t + 0.5 - mean) / sd))


def status(iv: RatioInterval, threshold: float) -> str:
    if iv.lower is None:
        return "INCONCLUSIVE"
    if iv.lower >= threshold:
        return "PASS"
    if iv.upper < threshold:
        return "FAIL"
    return "INCONCLUSIVE"


def has_interval(runs: int, confidence: float, paired: bool) -> bool:
    """Whether ``runs`` a side give an exact rank interval at ``confidence`` at all: pairs by the
    signed-rank statistic (its widest interval has coverage 1 - 2 / 2^n), independent runs by the
    rank-sum one."""
    if runs < 1:
        return False
    if paired:
        return 1 - 2 * signed_rank_cdf(0, runs) + 1e-12 >= confidence
    return order_index(runs, runs, confidence)[0] is not None


def runs_needed(iv: RatioInterval, threshold: float, confidence: float, bias_half: float = 0.0,
                cap: int = 200) -> int | None:
    """Runs per side at which an interval of this spread would clear the threshold.

    The sampling part of the interval's half-width shrinks about as 1/sqrt(runs) about the
    estimate; ``bias_half`` (log scale: the turn-bias correction's own share of the half-width,
    its standard error times the quantile) does not shrink, and adds in quadrature. None when
    the estimate sits within that share of the threshold (no number of runs in this design
    decides)."""
    if iv.lower is None:
        # the count whose smallest order statistic reaches the confidence: pairs by the signed-rank
        # statistic (2 / 2^n), independent runs by the rank-sum one
        n = max(iv.m, iv.n)
        while n <= cap and not has_interval(n, confidence, iv.method.startswith("signed-rank")):
            n += 1
        return n
    distance = abs(math.log(iv.estimate / threshold))
    if distance <= bias_half:
        return None
    half = math.log(iv.upper / iv.lower) / 2
    # the sampling share of the half-width, and the distance it may take once the bias's share is in
    sampling = math.sqrt(max(half ** 2 - bias_half ** 2, 0.0))
    n = max(iv.m, iv.n)
    return runs_to_decide(sampling, math.sqrt(distance ** 2 - bias_half ** 2), n, cap)


BOOTSTRAP_RESAMPLES = 4000


def bootstrap(groups: list[list[np.ndarray]], statistic, confidence: float,
              resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float | None, float | None]:
    """(point, lower, upper): a percentile bootstrap over runs, stratified.

    ``groups``: per side, one array (runs x features) per batch; each batch's runs are
    drawn with replacement, sides and batches independently, as they were measured.
    ``statistic`` maps a list of (resamples, runs, features) arrays, one per side, to one
    value per resample. Seeded: the same runs give the same interval; the point is the median of
    the resamples (inside the interval by construction). For statistics no
    rank inversion covers (a share of a change, the interaction of several sides' changes);
    with 3 runs a side it is narrower than its nominal confidence, like any bootstrap."""
    (one,) = bootstrap_many(groups, lambda drawn: np.asarray(statistic(drawn), dtype=float)[:, None], confidence,
                            resamples, seed)
    return one


def bootstrap_many(groups: list[list[np.ndarray]], statistic, confidence: float,
                   resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> list[tuple]:
    """As bootstrap(), for a statistic of several values per resample ((resamples, k) out):
    one (point, lower, upper) per value, from the same resamples."""
    rng = np.random.default_rng(seed)
    drawn = []
    for strata in groups:
        strata = [np.asarray(a, dtype=float) for a in strata if len(a)]
        drawn.append(np.concatenate([a[rng.integers(0, len(a), size=(resamples, len(a)))] for a in strata], axis=1))
    units = min(sum(len(a) for a in strata) for strata in groups)
    return _percentiles(np.asarray(statistic(drawn), dtype=float), confidence, resamples, units)


def bootstrap_pairs(baseline: np.ndarray, candidate: np.ndarray, statistic, confidence: float,
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> list[tuple]:
    """As bootstrap_many() for runs taken in pairs (row i of ``baseline`` and of ``candidate``, runs x
    features, ran together): whole pairs are drawn, both sides at once, so what a pair's slot shared
    stays shared in every resample (drawing each side's one run of a pair alone would redraw the same
    run every time: an interval of zero width)."""
    b, c = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    index = np.random.default_rng(seed).integers(0, len(b), size=(resamples, len(b)))
    return _percentiles(np.asarray(statistic([b[index], c[index]]), dtype=float), confidence, resamples, len(b))


def expanded_level(confidence: float, units: int) -> float:
    """The percentile bootstrap's level for ``units`` resampled units (Hesterberg's expanded
    percentile interval): z at the new level = sqrt(n / (n - 1)) t(n - 1) at the asked one, since
    resampling n units understates a mean's spread by sqrt((n - 1) / n) and a normal quantile
    understates t's; with 7-9 pairs the plain percentile interval covers about 85% at 90%."""
    if units < 2:
        return confidence
    t = stats.t.ppf(0.5 + confidence / 2, units - 1)
    return float(2 * norm.cdf(math.sqrt(units / (units - 1)) * t) - 1)


def _percentiles(values: np.ndarray, confidence: float, resamples: int, units: int) -> list[tuple]:
    """Per column: (the resamples' median, the percentile interval at the expanded level). The
    point is the median of the same resamples the interval is cut from, so it always lies inside
    its own interval (the plug-in value of a ratio of noisy changes need not)."""
    level = expanded_level(confidence, units)
    out = []
    for j in range(values.shape[1]):
        col = values[:, j][np.isfinite(values[:, j])]
        if len(col) < resamples / 2:
            out.append((None, None, None))
            continue
        lower, point, upper = np.quantile(col, [(1 - level) / 2, 0.5, (1 + level) / 2])
        out.append((float(point), float(lower), float(upper)))
    return out


def runs_to_decide(half_width: float, distance: float, runs: int, cap: int = 200) -> int | None:
    """Runs per side at which an interval of this spread (width ~ 1/sqrt(runs)) would be
    narrower than ``distance`` (how far its centre is from what would decide it)."""
    if distance <= 0:
        return None
    if half_width < distance:
        return runs
    return min(max(math.ceil(runs * (half_width / distance) ** 2), runs + 1), cap)


# --- a family of changes ---------------------------------------------------------------------------

def welch_p(baseline: np.ndarray, candidate: np.ndarray) -> float | None:
    """Two-sided p-value of no change from Welch's t on the per-run values. A family's marks need
    p-values finer than a rank test's: with 3 runs a side no rank test goes below p = 0.1, so no
    multiplicity control could ever select a change; Welch's t, on run means of many steps each,
    can (a run disturbed by another process widens its variance: the test becomes conservative)."""
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    if len(b) < 2 or len(c) < 2:
        return None
    if b.std() == 0 and c.std() == 0:
        return 1.0 if b.mean() == c.mean() else 0.0
    with warnings.catch_warnings():
        # runs that agree to many digits (a phase that does not move) are a result, not a precision problem
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(b, c, equal_var=False).pvalue)


def change_p(blocks: list[tuple]) -> float | None:
    """Two-sided p-value of no change, stratified by batch as the change's interval is: one batch
    is Welch's t; several are one shift with a level per batch (least squares, the residual
    variance pooled over the batches; a batch of one run a side makes it the paired t), so a
    shift of the host between batches cancels instead of inflating the variance."""
    blocks = [(np.asarray(b, dtype=float), np.asarray(c, dtype=float)) for b, c in blocks]
    blocks = [(b[np.isfinite(b)], c[np.isfinite(c)]) for b, c in blocks]
    blocks = [(b, c) for b, c in blocks if len(b) and len(c)]
    if len(blocks) <= 1:
        return welch_p(*blocks[0]) if blocks else None
    y = np.concatenate([np.concatenate([b, c]) for b, c in blocks])
    design = np.zeros((len(y), len(blocks) + 1))
    row = 0
    for s, (b, c) in enumerate(blocks):
        design[row:row + len(b) + len(c), s] = 1.0
        design[row + len(b):row + len(b) + len(c), -1] = 1.0
        row += len(b) + len(c)
    beta, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    df = len(y) - rank
    if df < 1:
        return None
    resid = y - design @ beta
    s2 = float(resid @ resid) / df
    shift = float(beta[-1])
    if s2 <= 1e-24 * max(1.0, float(y @ y) / len(y)):
        return 1.0 if abs(shift) <= 1e-12 * max(1.0, float(np.abs(y).max())) else 0.0
    se = math.sqrt(s2 * float(np.linalg.pinv(design.T @ design)[-1, -1]))
    return float(2 * stats.t.sf(abs(shift) / se, df))


@dataclass
class FamilyMarks:
    """Which changes of a family are selected: Benjamini-Hochberg at a false discovery rate of
    q = 1 - confidence over the family's m p-values. That rate holds as stated for independent or
    positively dependent tests; the changes of one report share their runs, and under any dependence
    Benjamini and Yekutieli's bound is q (1 + 1/2 + ... + 1/m) (``any_dependence``), which the report
    states beside it. Benjamini-Yekutieli's own selection, which holds q under any dependence, was
    tried: at the known-answer test's size (3 candidates x 5 columns, 12 runs a side) it left real
    optimizations' gains unmarked. If nothing had moved, about q m of the family's marginal intervals
    would exclude 0 by chance alone."""
    selected: list[bool]
    size: int
    error: float

    @property
    def chance_marks(self) -> float:
        return self.error * self.size

    @property
    def any_dependence(self) -> float:
        return min(1.0, self.error * sum(1 / i for i in range(1, self.size + 1)))


def family_marks(p_values: list[float], confidence: float) -> FamilyMarks:
    q, m = 1.0 - confidence, len(p_values)
    if m == 0:
        return FamilyMarks([], 0, q)
    # a missing p-value is a question asked and not selected: it counts in m, as a p of 1
    adjusted = false_discovery_control(np.nan_to_num(np.asarray(p_values, dtype=float), nan=1.0), method="bh")
    return FamilyMarks([bool(x <= q) for x in adjusted], m, q)


@dataclass(frozen=True)
class BiasBound:
    """How far a case's ratio in turns may sit from its ratio alone (log scale), from the measured
    cases: a random-effects prediction interval for one more case's bias."""
    mean: float  # the cases' common bias (inverse-variance weighted, with the between-case spread)
    mean_se: float
    between_sd: float  # tau: the spread of the cases' true biases beyond their measurement error
    lower: float  # the prediction interval for a case's bias
    upper: float
    cases: int
    confidence: float

    @property
    def bound(self) -> float:
        """The largest bias the prediction interval allows, either way."""
        return max(abs(self.lower), abs(self.upper))

    @property
    def prediction_se(self) -> float:
        """The standard error of ``mean`` as a prediction of one more case's (or candidate's) bias: the
        spread between them and the mean's own error, in quadrature."""
        return math.sqrt(self.between_sd ** 2 + self.mean_se ** 2)

    @property
    def df(self) -> int:
        """The degrees of freedom of the prediction's t (Higgins, Thompson and Spiegelhalter: k - 2)."""
        return self.cases - 2


# a turn-bias correction takes the spread between (candidate, case)s at the Q-profile's median
# (Viechtbauer's median-unbiased estimate), not at its 25% quantile as the bound did: a correction
# needs the spread as it is, not its worst case (the calibration study: docs/statistics.md)
PREDICTION_SPREAD_LEVEL = 0.5


def bias_bound(estimates: list[float], ses: list[float], confidence: float = 0.90,
               spread_level: float = 0.25) -> BiasBound | None:
    """A random-effects bound on the turn bias: each case's measured bias ``estimates[i]`` with its
    standard error ``ses[i]`` is its true bias plus noise, the true biases spread about a mean by
    tau. The prediction interval mean +- t(k-2) sqrt(tau^2 + se(mean)^2) (Higgins, Thompson and
    Spiegelhalter) covers one more case's true bias at ``confidence``. tau^2 is taken at the upper
    end of its Q-profile interval (the generalized Q at its chi-square ``spread_level`` quantile),
    not at DerSimonian-Laird's moment estimate: with a few slots a case, the cases' standard errors
    are themselves noisy and the moment estimate covers 0.86-0.87 at 2-4% spread between cases
    (mbaphases.stats.calibration). Unlike the largest measured difference, the bound does not grow
    with the alone design's noise or with the number of cases measured. None with fewer than three
    cases (no t on k - 2 df)."""
    d, s = np.asarray(estimates, float), np.asarray(ses, float)
    k = len(d)
    if k < 3 or np.any(s <= 0):
        return None

    def excess_q(tau2: float) -> float:
        w = 1 / (s ** 2 + tau2)
        mean = (w * d).sum() / w.sum()
        return float((w * (d - mean) ** 2).sum()) - float(stats.chi2.ppf(spread_level, k - 1))

    tau2 = 0.0
    if excess_q(0.0) > 0:
        high = 1.0
        while excess_q(high) > 0:
            high *= 10
        tau2 = float(optimize.brentq(excess_q, 0.0, high))
    w = 1 / (s ** 2 + tau2)
    mean = float((w * d).sum() / w.sum())
    mean_se = float(1 / math.sqrt(w.sum()))
    half = float(stats.t.ppf(0.5 + confidence / 2, k - 2)) * math.sqrt(tau2 + mean_se ** 2)
    return BiasBound(mean, mean_se, math.sqrt(tau2), mean - half, mean + half, k, confidence)


def quantile(confidence: float, df: float | None) -> float:
    """Student's t quantile of a two-sided interval at ``confidence`` on ``df`` (None or math.inf: a rank
    or normal interval, the normal quantile, which scipy's t gives at infinite df)."""
    return float(stats.t.ppf(0.5 + confidence / 2, math.inf if df is None else df))


@dataclass(frozen=True)
class Corrected:
    """A ratio's interval with a known bias taken out: the estimate divided by exp(bias), each end's
    distance from it the sampling error and the bias's prediction error in quadrature."""
    lower: float
    upper: float
    estimate: float
    df: float  # Welch-Satterthwaite's, of the two errors together


def correct_bias(lower: float, upper: float, estimate: float, df: float, confidence: float,
                 bias: float, bias_se: float, bias_df: float) -> Corrected:
    """The interval [lower, upper] (at ``confidence``, around ``estimate``, its quantile Student's t on
    ``df``: math.inf for a rank interval, read as normal) with the bias ``bias`` (log scale, the
    design's ratio minus the ratio alone) subtracted and its standard error ``bias_se`` (on
    ``bias_df``) added in quadrature to each end's own standard error: a correction, not a widening
    by the bias's whole bound (which spends the width twice and lands a one-sided bias on one
    verdict's side). Each end keeps its own distance (a rank interval need not be symmetric)."""
    q = quantile(confidence, df)
    centre = math.log(estimate)
    ends = []
    for end in (lower, upper):
        v1 = (abs(math.log(end) - centre) / q) ** 2
        v2 = bias_se ** 2
        both = v1 + v2
        df_eff = both ** 2 / ((v1 ** 2 / df if math.isfinite(df) else 0.0) + v2 ** 2 / bias_df) if both > 0 else math.inf
        ends.append((math.sqrt(both), df_eff))
    df_eff = min(d for _, d in ends)
    q_eff = quantile(confidence, df_eff)
    shifted = centre - bias
    return Corrected(math.exp(shifted - q_eff * ends[0][0]), math.exp(shifted + q_eff * ends[1][0]),
                     math.exp(shifted), df_eff)


@dataclass(frozen=True)
class Pooled:
    """A random-effects summary of several cases' estimates: their mean with its interval."""
    mean: float
    lower: float
    upper: float
    between_sd: float
    cases: int


def pooled(estimates: list[float], ses: list[float], confidence: float) -> Pooled:
    """The random-effects mean of ``estimates`` (each with its standard error) by statsmodels'
    combine_effects (Paule-Mandel's spread between them), its interval the wider of the t interval
    on k - 1 df and Hartung-Knapp-Sidik-Jonkman's: HKSJ alone narrows below the t interval where the
    estimates agree more than their errors say (Roever et al. 2015's modification)."""
    # statsmodels' meta-analysis pulls in its formula machinery: imported where a pooled row is made
    from statsmodels.stats.meta_analysis import combine_effects  # noqa: PLC0415
    found = combine_effects(np.asarray(estimates, float), np.square(np.asarray(ses, float)), method_re="iterated")
    k = len(estimates)
    se = max(float(found.sd_eff_w_re), float(np.sqrt(found.var_hksj_re)))
    half = quantile(confidence, k - 1) * se
    mean = float(found.mean_effect_re)
    return Pooled(mean, mean - half, mean + half, float(np.sqrt(found.tau2)), k)
