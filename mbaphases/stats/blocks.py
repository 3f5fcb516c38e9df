"""Pairs as the blocks of an incomplete block design: the intra-block analysis.

A round-robin batch runs every side once a round, two at a time, so two sides meet directly
only once in n-1 rounds: too few pairs for a paired interval of their own. Every pair shares its
minutes, though, and a slowdown of the host during it hits both of its runs (measured on a
shared 2-core VM: 25-30% for about half a minute, on both CPUs at once; docs/log/noise.md). The
least-squares fit, per case, of

    log(value) = side + pair + CPU + error

with the pairs as fixed blocks compares any two sides through every pair that connects them, each
pair's shared slowdown taken out (the classical intra-block analysis of an incomplete block
design). The CPUs swap sides every round, so a CPU's own pace (measured: the side on CPU 1 2-5%
faster in a run's first cases in two main jobs) is a period effect of a crossover, fitted rather
than left in the error. In turns the pair shares its CPUs, and the period is which side took the
first turn (role 0): fitted the same way. The interval of a contrast is Student's t on the residual degrees of
freedom: a normal model of what is left once the slots' slowdowns are out, where the rank
intervals make no such assumption; the report shows the unpaired rank interval of the same runs
beside it.

The sides need not be equally noisy (a side with two modes is much noisier than the rest, and one
residual variance pooled over all sides understates its intervals): a side whose own residuals say
it is noisier than the pool widens its contrasts (linear).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
from scipy import stats

# fewer residual degrees of freedom make t's quantile, and so the interval, too wide to help
MIN_DF = 4


@dataclass
class Fit:
    """One case's fit: the sides it knows, the pairs it used and what is left of the runs."""
    result: object  # statsmodels' RegressionResults
    sides: list[str]
    row_sides: np.ndarray  # the side of each row of the fit's design
    pairs: int
    df: int
    components: dict[str, int]  # side -> its connected component (sides compared only within one)
    # side -> its variance over the pooled one (at least 1): this case's own estimate, or, once
    # share_noisiness has run over a batch's cases, their mean
    noisiness: dict[str, float] = field(default_factory=dict)

    @cached_property
    def pinv(self) -> np.ndarray:
        """The design's pseudo-inverse: every contrast and the residuals of the fit are made from it."""
        return np.linalg.pinv(np.asarray(self.result.model.exog, dtype=float))

    @cached_property
    def own(self) -> dict[str, float]:
        """This case's own variance of each side over the pooled one (own_ratios)."""
        return own_ratios(self)

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
    """``rows``: (side, pair, value > 0[, CPU[, role]]) of one case, every run that ran in a pair
    (role: 0 for the side that took the first turn). A pair with one run left (its partner failed the
    case) says nothing about the sides and is left out. None when fewer than three sides or MIN_DF
    residual degrees of freedom remain."""
    kept, pairs = _paired(rows)
    sides = sorted({r[0] for r in kept})
    if len(sides) < 3:
        return None
    columns = {"side": [str(r[0]) for r in kept], "pair": [str(r[1]) for r in kept], **_periods(kept, pairs)}
    # imported here: statsmodels takes a second to import, which every command (run, find, ab) paid
    # at start-up though only a fit of pairs uses it
    from statsmodels.regression.linear_model import OLS  # noqa: PLC0415
    y = np.log(np.array([r[2] for r in kept], dtype=float))
    result = OLS(y, _design(columns, len(kept))).fit()
    if "role" in columns and int(round(result.df_resid)) < MIN_DF:
        # the position term costs a degree of freedom; a design too small for both (6 sides after 3
        # rounds) is fitted without it, the first turn's worth then left in the residual
        del columns["role"]
        result = OLS(y, _design(columns, len(kept))).fit()
    df = int(round(result.df_resid))
    if df < MIN_DF or not result.scale > 0:
        return None
    made = Fit(result, sides, np.array([r[0] for r in kept], dtype=object), len(pairs), df,
               _components([[x[0] for x in g] for g in pairs.values()]))
    made.noisiness = {side: max(1.0, ratio) for side, ratio in made.own.items()}
    return made


def _paired(rows: list[tuple]) -> tuple[list[tuple], dict]:
    """The rows of pairs with both runs left (padded to side, pair, value, CPU, role) and each pair's
    two rows. Plain lists, not a frame: the calibration study makes thousands of fits, and pandas'
    overhead was most of each."""
    rows = [tuple(r) + (None,) * (5 - len(r)) for r in rows]
    members: dict = {}
    for r in rows:
        if r[2] is not None and math.isfinite(r[2]) and r[2] > 0:
            members.setdefault(r[1], []).append(r)
    pairs = {p: group for p, group in members.items() if len(group) == 2}
    return [r for group in pairs.values() for r in group], pairs


def _periods(kept: list[tuple], pairs: dict) -> dict[str, list[str]]:
    """The crossover's period factor: the CPU where a pair's two runs had two (its pace, the CPUs
    swapping every round); in turns, where a pair shares its CPUs, which side took the first turn (it
    starts each case's loop on its own). Its interaction with the round is left in the residual: at
    3-6 rounds it would cost as many degrees of freedom as the rounds."""
    if all(r[3] is not None for r in kept) and any(len({x[3] for x in g}) > 1 for g in pairs.values()):
        return {"cpu": [str(r[3]) for r in kept]}
    if all(r[4] is not None for r in kept) and all(len({x[4] for x in g}) == 2 for g in pairs.values()):
        return {"role": [str(r[4]) for r in kept]}
    return {}


def _design(columns: dict[str, list[str]], rows: int) -> pd.DataFrame:
    """The treatment-coded design of ``y ~ C(side) + C(pair) [+ C(cpu)] [+ C(role)]`` as its formula
    would make it (an intercept, each factor's levels past its first, columns named
    ``C(f)[T.level]``), built directly: the formula parser cost more than the fit."""
    design = {"Intercept": np.ones(rows)}
    for factor, values in columns.items():
        values = np.asarray(values)
        for level in sorted(set(values))[1:]:
            design[f"C({factor})[T.{level}]"] = (values == level).astype(float)
    return pd.DataFrame(design)


def _components(pairs: list[list[str]]) -> dict[str, int]:
    """Sides joined by pairs: a contrast is estimable only between sides of one component."""
    parent = {s: s for pair in pairs for s in pair}

    def root(s):
        while parent[s] != s:
            s = parent[s]
        return s
    for a, b in pairs:
        parent[root(a)] = root(b)
    roots = {}
    return {s: roots.setdefault(root(s), len(roots)) for s in sorted(parent)}


def side_weights(f: Fit, coefficients: dict[str, float]) -> np.ndarray:
    """The parameter weights of sum_s coefficient_s x side_s (the coefficients summing to 0)."""
    names = list(f.result.params.index)
    weights = np.zeros(len(names))
    for side, coefficient in coefficients.items():
        name = f"C(side)[T.{side}]"
        if name in names:  # the first side is the formula's reference level: no parameter of its own
            weights[names.index(name)] += coefficient
    return weights


@dataclass
class Linear:
    """A linear combination of the sides' fitted levels (log scale) with its standard error."""
    estimate: float
    se: float
    df: float


def own_ratios(f: Fit) -> dict[str, float]:
    """Each side's own variance over the pooled one, unbiased: the residuals r = M y
    (M = I - X pinv(X)) have E[sum_{i in s} r_i^2] = sum_t A_st sigma^2_t,
    A_st = sum_{i in s, j in t} M_ij^2 (a pair's two residuals share their block), solved for the
    sigma^2 (a pseudo-inverse: in a star of pairs only each candidate's sum with the reference is
    known, which is all its contrast needs)."""
    X, y = np.asarray(f.result.model.exog, dtype=float), np.asarray(f.result.model.endog, dtype=float)
    M = np.eye(len(y)) - X @ f.pinv
    member = np.array([[s == t for t in f.row_sides] for s in f.sides], dtype=float)  # sides x rows
    own = np.linalg.pinv(member @ (M ** 2) @ member.T) @ (member @ (M @ y) ** 2)
    return {side: float(v) / float(f.result.scale) for side, v in zip(f.sides, own)}


def share_noisiness(fits: dict[str, Fit]) -> None:
    """In place: every fit of a batch's cases takes each side's noisiness as its mean over the cases
    (at least 1). With 4 runs a side one case's own estimate has about one degree of freedom, too
    noisy to act on (taken as it is, it widened every side's intervals by a median 28% on the main
    job); a side noisier than the rest is noisier in most of its cases, which the mean sees with the
    cases' degrees of freedom together."""
    ratios: dict[str, list[float]] = {}
    for f in fits.values():
        for side, ratio in f.own.items():
            ratios.setdefault(side, []).append(ratio)
    for f in fits.values():
        f.noisiness = {side: max(1.0, float(np.mean(ratios[side]))) for side in f.sides}


def linear(f: Fit, coefficients: dict[str, float]) -> Linear:
    """sum_s coefficient_s x side_s with its standard error: the least-squares estimate L y
    (L = w' pinv(X)), whose variance is sum_i L_i^2 sigma^2_side(i), each side's variance the pooled
    one times its noisiness (Fit.noisiness, never below 1), on the fit's residual df: a side noisier
    than the pool widens its own contrasts (coverage with one side 4 times noisier in a batch of 4
    cases: mbaphases.stats.calibration; the pooled fit covered 0.74 at 90%)."""
    y = np.asarray(f.result.model.endog, dtype=float)
    L = side_weights(f, coefficients) @ f.pinv
    scale = np.array([f.noisiness.get(side, 1.0) for side in f.row_sides]) * float(f.result.scale)
    return Linear(float(L @ y), math.sqrt(float((L ** 2) @ scale)), float(f.df))


def contrast(f: Fit, baseline: str, candidate: str, confidence: float) -> Contrast | None:
    """The ratio candidate / baseline with its t interval at ``confidence`` (each side's own
    variance where above the pooled one); None when either side is not in the fit or the two are not
    connected by pairs."""
    if baseline not in f.sides or candidate not in f.sides or f.components[baseline] != f.components[candidate]:
        return None
    one = linear(f, {candidate: 1.0, baseline: -1.0})
    half = float(stats.t.ppf(0.5 + confidence / 2, one.df)) * one.se
    p = float(2 * stats.t.sf(abs(one.estimate) / one.se, one.df)) if one.se > 0 else float(one.estimate == 0)
    return Contrast(math.exp(one.estimate), math.exp(one.estimate - half), math.exp(one.estimate + half),
                    int(round(one.df)), f.pairs, f.residual_sd, p)


@dataclass
class Interaction:
    """Additivity in ms: the combined side's change and the sum of the single sides' changes (each
    against the reference, its median ``base`` changed by the fitted ratio), their difference with
    its interval (the delta method on the fitted levels)."""
    measured: float
    sum_of_parts: float
    estimate: float
    lower: float
    upper: float
    df: float


def interaction(f: Fit, reference: str, combined: str, singles: list[str], base: float,
                confidence: float) -> Interaction | None:
    """None where a side is not in the fit or not connected to the reference by pairs."""
    involved = [combined, *singles]
    if reference not in f.sides or any(s not in f.sides or f.components[s] != f.components[reference]
                                       for s in involved):
        return None
    ratio = {s: math.exp(linear(f, {s: 1.0, reference: -1.0}).estimate) for s in involved}
    measured = base * (ratio[combined] - 1)
    parts = sum(base * (ratio[s] - 1) for s in singles)
    # the gradient of measured - parts in each side's level; the reference's balances the rest
    gradient = {combined: base * ratio[combined]}
    for s in singles:
        gradient[s] = gradient.get(s, 0.0) - base * ratio[s]
    gradient[reference] = -sum(gradient.values())
    one = linear(f, gradient)
    half = float(stats.t.ppf(0.5 + confidence / 2, one.df)) * one.se
    point = measured - parts
    return Interaction(measured, parts, point, point - half, point + half, one.df)
