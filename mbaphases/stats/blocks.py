"""Duet pairs as the blocks of an incomplete block design: the intra-block analysis.

A round-robin duet batch runs every side once a round, two at a time, so two sides meet directly
only once in n-1 rounds: too few pairs for a paired interval of their own. Every pair shares its
time slot, though, and a slowdown of the host during it hits both of its runs (measured on a
shared 2-core VM: 25-30% for about half a minute, on both CPUs at once; docs/noise.md). The
least-squares fit, per case, of

    log(value) = side + pair + CPU + error

with the pairs as fixed blocks compares any two sides through every pair that connects them, each
pair's shared slowdown taken out (the classical intra-block analysis of an incomplete block
design). The CPUs swap sides every round, so a CPU's own pace (measured: the side on CPU 1 2-5%
faster in a run's first cases in two main jobs) is a period effect of a crossover, fitted rather
than left in the error. The interval of a contrast is Student's t on the residual degrees of
freedom: a normal model of what is left once the slots' slowdowns are out, where the rank
intervals make no such assumption; the report shows the unpaired rank interval of the same runs
beside it.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf

# fewer residual degrees of freedom make t's quantile, and so the interval, too wide to help
MIN_DF = 4


@dataclass
class Fit:
    """One case's fit: the sides it knows, the pairs it used and what is left of the runs."""
    result: object  # statsmodels' RegressionResults
    sides: list[str]
    pairs: int
    df: int
    components: dict[str, int]  # side -> its connected component (sides compared only within one)

    @property
    def residual_sd(self) -> float:
        """The spread of a run once its pair's slot is out (log scale: 0.02 is about 2%)."""
        return math.sqrt(self.result.scale)


@dataclass
class Contrast:
    estimate: float  # the ratio candidate / baseline
    lower: float
    upper: float
    df: int
    pairs: int
    residual_sd: float
    p: float  # two-sided, of no change


def fit(rows: list[tuple]) -> Fit | None:
    """``rows``: (side, pair, value > 0[, CPU]) of one case, every run that ran in a duet pair. A
    pair with one run left (its partner failed the case) says nothing about the sides and is left
    out. None when fewer than three sides or MIN_DF residual degrees of freedom remain."""
    rows = [tuple(r) + (None,) * (4 - len(r)) for r in rows]
    frame = pd.DataFrame(rows, columns=["side", "pair", "value", "cpu"])
    frame = frame[np.isfinite(frame.value) & (frame.value > 0)]
    frame = frame[frame.groupby("pair").pair.transform("size") == 2].copy()
    sides = sorted(frame.side.unique())
    if len(sides) < 3:
        return None
    frame["y"] = np.log(frame.value)
    # a CPU's pace is a period effect only where a pair's two runs had two CPUs; pairs that shared
    # one CPU carry it in their block already
    cpus = frame.cpu.notna().all() and frame.groupby("pair").cpu.nunique().max() > 1
    frame["cpu"] = frame.cpu.astype(str)
    result = smf.ols("y ~ C(side) + C(pair)" + (" + C(cpu)" if cpus else ""), data=frame).fit()
    df = int(round(result.df_resid))
    if df < MIN_DF or not result.scale > 0:
        return None
    return Fit(result, sides, int(frame.pair.nunique()), df, _components(frame))


def _components(frame: pd.DataFrame) -> dict[str, int]:
    """Sides joined by pairs: a contrast is estimable only between sides of one component."""
    parent = {s: s for s in frame.side.unique()}

    def root(s):
        while parent[s] != s:
            s = parent[s]
        return s
    for _, members in frame.groupby("pair").side:
        a, b = list(members)
        parent[root(a)] = root(b)
    roots = {}
    return {s: roots.setdefault(root(s), len(roots)) for s in parent}


def contrast(f: Fit, baseline: str, candidate: str, confidence: float) -> Contrast | None:
    """The ratio candidate / baseline with its t interval at ``confidence``; None when either side
    is not in the fit or the two are not connected by pairs."""
    if baseline not in f.sides or candidate not in f.sides or f.components[baseline] != f.components[candidate]:
        return None
    names = list(f.result.params.index)
    weights = np.zeros(len(names))
    for side, sign in ((candidate, 1.0), (baseline, -1.0)):
        name = f"C(side)[T.{side}]"
        if name in names:  # the first side is the formula's reference level: no parameter of its own
            weights[names.index(name)] += sign
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a pinv fit with fixed blocks warns of its (expected) rank
        test = f.result.t_test(weights)
    effect = float(np.ravel(test.effect)[0])
    lo, hi = (float(x) for x in np.ravel(test.conf_int(alpha=1 - confidence)))
    return Contrast(math.exp(effect), math.exp(lo), math.exp(hi), f.df, f.pairs, f.residual_sd,
                    float(np.ravel(test.pvalue)[0]))
