"""Where the variance sits (Kalibera and Jones 2013, "Rigorous Benchmarking in Reasonable Time"):
the spread of a side's figure split into its levels (between batches, between runs of a batch,
between windows of k steps inside a run), estimated by the method of moments on the log scale
(a component is a relative spread), and the repetition counts that reach a precision at the
least machine time: repeat at the level that carries the variance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class Components:
    """Standard deviations (log scale: 0.03 is about 3%) of one window, one run and one batch
    effect, with the counts they were estimated from."""
    window: float
    run: float
    batch: float | None  # None with one batch
    windows_per_run: int
    runs: int
    batches: int

    def per_run(self, windows: int) -> float:
        """The variance of one run's log mean over ``windows`` windows (its batch aside)."""
        return self.run ** 2 + self.window ** 2 / windows


def window_means(step_ms: np.ndarray, k: int) -> np.ndarray:
    """Means of consecutive windows of ``k`` steps (a last partial window is left out)."""
    step_ms = np.asarray(step_ms, dtype=float)
    n = len(step_ms) // k
    return step_ms[: n * k].reshape(n, k).mean(axis=1)


def estimate(runs: list[tuple[str, np.ndarray]], k: int) -> Components | None:
    """``runs``: (batch, per-step active ms of the run). Each level's variance is what its means
    spread beyond what the level below explains (never below 0)."""
    per_run = [(batch, np.log(window_means(x, k))) for batch, x in runs]
    per_run = [(b, w) for b, w in per_run if len(w) >= 2]
    if len(per_run) < 2:
        return None
    n_w = min(len(w) for _, w in per_run)
    per_run = [(b, w[:n_w]) for b, w in per_run]
    s2_window = float(np.mean([np.var(w, ddof=1) for _, w in per_run]))
    batches: dict[str, list[float]] = {}
    for b, w in per_run:
        batches.setdefault(b, []).append(float(w.mean()))
    within = [np.var(v, ddof=1) for v in batches.values() if len(v) >= 2]
    if not within:
        return None
    s2_runs = float(np.mean(within))
    var_run = max(0.0, s2_runs - s2_window / n_w)
    var_batch = None
    if len(batches) >= 2:
        n_r = min(len(v) for v in batches.values())
        s2_batches = float(np.var([np.mean(v) for v in batches.values()], ddof=1))
        var_batch = max(0.0, s2_batches - s2_runs / n_r)
    return Components(math.sqrt(s2_window), math.sqrt(var_run), None if var_batch is None else math.sqrt(var_batch),
                      n_w, len(per_run), len(batches))


def best_windows(c: Components, run_cost_s: float, window_cost_s: float, most: int = 1000) -> int:
    """Windows per run at the least time for a given precision of a side's mean (Kalibera and
    Jones's optimum for two levels): sqrt(cost of a run's start x window variance / (cost of a
    window x run variance)); as few as one where runs carry no variance of their own is moot:
    then every window counts alike and the longest run is cheapest."""
    if c.run <= 0:
        return most
    return max(1, min(most, round(math.sqrt(run_cost_s * c.window ** 2 / (window_cost_s * c.run ** 2)))))


def runs_for(c: Components, windows: int, half_width: float, z: float = 1.645, sides: float = 2) -> int:
    """Runs a side so that a ratio of two sides' means has about ``half_width`` (relative) at z:
    var(log ratio) = sides x (run variance + window variance / windows) / runs (``sides``: 2 for
    two sides' own runs; a pair's log ratio is one such variance, mbaphases.allocation)."""
    return max(2, math.ceil(sides * c.per_run(windows) * (z / half_width) ** 2))
