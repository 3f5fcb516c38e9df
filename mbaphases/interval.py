"""The distribution-free confidence interval for the throughput ratio.

Inverting the Mann-Whitney test gives the Hodges-Lehmann interval for a shift:
with m baseline and n candidate runs, sort the m x n pairwise log ratios
log(c_j / b_i); the k-th smallest to the k-th largest cover the true log ratio
with confidence 1 - 2 P(U <= k - 1), U the Mann-Whitney statistic under the
null (exact below 20 runs a side, normal approximation above). At 3 vs 3, k = 1
gives [min c / max b, max c / min b] at exactly 90%: the interval rule of the
seed; with more runs the same confidence uses inner order statistics, so the
interval narrows instead of widening.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

EXACT_BELOW = 20


@lru_cache(maxsize=None)
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
    lower: float | None  # ratio (candidate / baseline), not log
    upper: float | None
    estimate: float  # Hodges-Lehmann: exp(median of the log ratios)
    k: int | None
    coverage: float | None  # the exact confidence of [lower, upper]
    m: int
    n: int

    @property
    def half_width(self) -> float | None:
        """Smallest detectable relative change: half the interval's relative width."""
        if self.lower is None:
            return None
        return math.sqrt(self.upper / self.lower) - 1


def ratio_interval(baseline: np.ndarray, candidate: np.ndarray, confidence: float) -> RatioInterval:
    b, c = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    d = np.sort((np.log(c)[None, :] - np.log(b)[:, None]).ravel())
    k, coverage = order_index(len(b), len(c), confidence)
    est = float(np.exp(np.median(d)))
    if k is None:
        return RatioInterval(None, None, est, None, None, len(b), len(c))
    return RatioInterval(float(np.exp(d[k - 1])), float(np.exp(d[-k])), est, k, coverage, len(b), len(c))


def status(iv: RatioInterval, threshold: float) -> str:
    if iv.lower is None:
        return "INCONCLUSIVE"
    if iv.lower >= threshold:
        return "PASS"
    if iv.upper < threshold:
        return "FAIL"
    return "INCONCLUSIVE"


def runs_needed(iv: RatioInterval, threshold: float, confidence: float, cap: int = 200) -> int | None:
    """Runs per side at which an interval of this spread would clear the threshold.

    The interval's width shrinks about as 1/sqrt(runs); the estimate stays where
    it is. None when the estimate sits on the threshold (no number of runs decides)."""
    if iv.lower is None:
        n = max(iv.m, iv.n)
        while n <= cap and order_index(n, n, confidence)[0] is None:
            n += 1
        return n
    distance = abs(math.log(iv.estimate / threshold))
    half = math.log(iv.upper / iv.lower) / 2
    if distance == 0:
        return None
    n = max(iv.m, iv.n)
    need = math.ceil(n * (half / distance) ** 2)
    return min(max(need, n + 1), cap) if half >= distance else n
