"""Windows per run and runs per side from this machine's stored runs (Kalibera and Jones 2013):
where a comparison's variance sits (between a run's windows of k steps, between runs beyond
them), what each level costs (a window's steps; a run's own start, set-up and warmup), and the
allocation that reaches a target interval half-width at the least machine time.

Said before a formal run and kept in its batch record. A profile's measured steps are part of
what is compared (the asv benchmark version), so the plan says which steps to pin rather than
changing them under a batch; the rounds it names are what `--until-decisive` adds up to.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sps

from mbaphases import load
from mbaphases.stats import components

TARGET_HALF_WIDTH = 0.03  # pins target_half_width overrides
MOST_WINDOWS = 100  # 1,000 steps a case at 10-step windows: beyond it a run is mostly window
MOST_ROUNDS = 200
# what the history must match for its spread to speak for this batch (measured steps may differ:
# a window's spread does not depend on how many windows a run has)
SAME_SETUP = ("num_envs", "replay_capacity_steps", "torch_threads", "overrides")


@dataclass
class CaseNoise:
    """One case's spread of a comparison (log scale) and what its levels cost, from the history."""
    case: str
    window_sd: float  # between windows of k steps inside a run (of a pair's log ratio, in pairs)
    run_sd: float  # between runs (pairs) beyond what their windows explain
    run_cost_s: float  # a run's own machine time for the case beyond its measured window
    window_cost_s: float  # machine time of one window of k steps
    runs: int  # runs (pairs) it was estimated from

    def levels(self) -> components.Components:
        return components.Components(self.window_sd, self.run_sd, None, 0, self.runs, 1)


@dataclass
class Design:
    """How a batch compares two sides. ``per_side_var``: the log ratio's variance per run a side,
    in units of one run's (one pair's) variance: 2 for independent runs of two sides, 1 for a pair
    pair of the two, 2(n-1)/n for a round-robin of n sides (each comparison through every side's
    pairs, the block fit: n-1 rounds meet every two sides once)."""
    name: str
    pairs: bool
    share_cpu: bool
    per_side_var: float
    sides: int
    round_robin: bool

    def df(self, runs: int) -> int:
        """The interval's degrees of freedom at ``runs`` a side: a round-robin's block fit has n/2
        pairs a round less the n-1 sides' effects; a pair stratum one less than its pairs;
        two sides' own runs two less than their runs."""
        if self.round_robin:
            return runs * (self.sides // 2) - (self.sides - 1)
        return runs - 1 if self.pairs else 2 * runs - 2


def design_of(duet: bool, share_cpu: bool, pairing: str, sides: int) -> Design:
    if not duet:
        return Design("solo", False, False, 2.0, sides, False)
    round_robin = pairing == "round-robin" and sides > 2
    name = f"{'turns' if share_cpu else 'pairs'} ({pairing})"
    return Design(name, True, share_cpu, 2 * (sides - 1) / sides if round_robin else 1.0, sides, round_robin)


def _setup(profile: dict) -> dict:
    return {k: profile.get(k) for k in SAME_SETUP}


def stored_runs(machine_dir: Path):
    """(meta, entry results) of each stored run of the machine that has both, in path order; a run
    cut off mid-write is passed over (the report names it)."""
    for meta_path in sorted(Path(machine_dir).glob("*/run*.meta.json")):
        raw = meta_path.with_name(meta_path.name.replace(".meta", ""))
        try:
            meta = json.loads(meta_path.read_text())
            results = json.loads(raw.read_text()).get("results", []) if raw.is_file() else []
        except (OSError, ValueError):
            continue
        if results:
            yield meta, results


def read_history(machine_dir: Path, profile: dict, design: Design, k: int = load.WINDOW_STEPS) -> dict:
    """The machine's stored runs of the same set-up and design, per case: each run's per-step
    active ms with its side, pair and batch, and its own cost beyond its window. A run that kept
    only means has no windows to tell and is left out."""
    cells: dict[str, dict] = {}
    runs = [(meta, results) for meta, results in stored_runs(machine_dir)
            if _setup(meta.get("profile") or {}) == _setup(profile)
            and bool((meta.get("duet") or {}).get("pair")) == design.pairs
            and bool((meta.get("duet") or {}).get("share_cpu")) == design.share_cpu]
    between = _between_runs_s(meta for meta, _ in runs)
    for meta, results in runs:
        duet = meta.get("duet") or {}
        # a pair on one CPU runs both sides' steps in the same wall time: each side's own share is
        # half; so is the time its CPU spent between the pair's runs and the previous ones
        wall_per_case = (meta.get("ended", 0) - meta.get("started", 0) + between) / len(results) / (
            2 if design.share_cpu else 1)
        for r in results:
            steps = load.active_steps(r)
            if steps is None or len(steps) < 2 * k:
                continue
            steps = np.asarray(steps, dtype=float)
            cell = cells.setdefault(load.case_name(r["case"]), {"runs": [], "run_cost_s": [], "step_s": []})
            cell["runs"].append({"side": meta["commit"], "pair": duet.get("pair"), "batch": meta.get("batch", "?"),
                                 "steps": steps})
            cell["run_cost_s"].append(max(0.0, wall_per_case - steps.sum() / 1000))
            cell["step_s"].append(float(steps.mean()) / 1000)
    return cells


def _between_runs_s(metas) -> float:
    """The median time a CPU spent from one run's end to the next run's start in a batch (asv's
    own start of the next run, a wave's wait for the other CPU): machine time each run costs
    beyond its own process."""
    ends: dict[tuple, list[tuple[float, float]]] = {}
    for m in metas:
        key = (m.get("batch"), (m.get("duet") or {}).get("cpu"))
        ends.setdefault(key, []).append((m.get("started", 0), m.get("ended", 0)))
    gaps = []
    for spans in ends.values():
        spans.sort()
        last_end = spans[0][1]
        for start, end in spans[1:]:
            if start > last_end:  # the partner of a pair on one CPU starts inside its first side's run
                gaps.append(start - last_end)
            last_end = max(last_end, end)
    return float(np.median(gaps)) if gaps else 0.0


def _pair_levels(runs: list[dict], k: int) -> tuple[float, float, int] | None:
    """(window sd, pair sd beyond the windows, pairs) of the pairs' log ratio: within a pair the
    k-th windows of the two sides ran at about the same time; between pairs, what an additive
    model of the sides (a ratio per two sides) leaves."""
    by_pair: dict[str, dict] = {}
    for run in runs:
        by_pair.setdefault(run["pair"], {})[run["side"]] = run["steps"]
    window_vars, rows = [], []
    for pair in by_pair.values():
        if len(pair) != 2:
            continue
        (a, xa), (b, xb) = sorted(pair.items())
        n = min(len(xa), len(xb))
        wa, wb = components.window_means(xa[:n], k), components.window_means(xb[:n], k)
        window_vars.append((float(np.var(np.log(wb / wa), ddof=1)), len(wa)))
        rows.append((a, b, float(np.log(xb[:n].sum() / xa[:n].sum()))))
    sides = sorted({s for a, b, _ in rows for s in (a, b)})
    df = len(rows) - (len(sides) - 1)
    if df < 2:
        return None
    index = {s: i for i, s in enumerate(sides)}
    design = np.zeros((len(rows), len(sides)))
    for i, (a, b, _) in enumerate(rows):
        design[i, index[b]] += 1
        design[i, index[a]] -= 1
    y = np.array([x for *_, x in rows])
    fit, *_ = np.linalg.lstsq(design[:, 1:], y, rcond=None)
    residual = y - design[:, 1:] @ fit
    s2 = float(residual @ residual / df)
    per_window = float(np.mean([1 / n for _, n in window_vars]))  # runs of other lengths: their mean share
    # windows that vary in a pattern every run repeats (a reset at the same step) spread more than
    # the pairs do: then all of the pairs' spread is taken to scale with the windows, no more
    window_var = min(float(np.mean([v for v, _ in window_vars])), s2 / per_window)
    return math.sqrt(window_var), math.sqrt(max(0.0, s2 - window_var * per_window)), len(rows)


def case_noise(cells: dict, design: Design, k: int = load.WINDOW_STEPS) -> list[CaseNoise]:
    out = []
    for case, cell in sorted(cells.items()):
        if design.pairs:
            levels = _pair_levels(cell["runs"], k)
        else:
            # each side's own levels (components.estimate), the median over sides
            per_side = [components.estimate([(r["batch"], r["steps"]) for r in cell["runs"] if r["side"] == s], k)
                        for s in sorted({r["side"] for r in cell["runs"]})]
            per_side = [c for c in per_side if c is not None]
            levels = ((float(np.median([c.window for c in per_side])), float(np.median([c.run for c in per_side])),
                       sum(c.runs for c in per_side)) if per_side else None)
        if levels is None:
            continue
        out.append(CaseNoise(case, levels[0], levels[1], float(np.median(cell["run_cost_s"])),
                             k * float(np.median(cell["step_s"])), levels[2]))
    return out


@functools.cache
def _quantile(confidence: float, df: int) -> float:
    return float(sps.t.ppf(0.5 + confidence / 2, df))


def half_width(noise: CaseNoise, design: Design, windows: int, runs: int, confidence: float) -> float:
    """About half the relative width of the ratio's interval at ``runs`` a side of ``windows`` (a
    t interval on the log scale; infinite where the design has no degree of freedom left)."""
    df = design.df(runs)
    if df < 1:
        return math.inf
    return math.expm1(_quantile(confidence, df) * math.sqrt(design.per_side_var * noise.levels().per_run(windows) / runs))


def runs_needed(noise: CaseNoise, design: Design, windows: int, target: float, confidence: float) -> int | None:
    """The fewest runs a side (at least 2: one run has no spread) for a half-width of at most
    ``target``; None beyond MOST_ROUNDS."""
    return next((r for r in range(2, MOST_ROUNDS + 1) if half_width(noise, design, windows, r, confidence) <= target),
                None)


def allocate(noise: list[CaseNoise], design: Design, target: float, confidence: float) -> tuple[int, int] | None:
    """(windows a run, runs a side) at the least machine time with the median case's half-width at
    most ``target``: one measured length for every case (they share a profile) and one number of
    rounds (a run measures every case). None when no allocation within the limits reaches it."""
    best = None
    for windows in range(1, MOST_WINDOWS + 1):
        # the median case reaches the target once the middle case (the upper one of an even count) does
        needed = sorted(runs_needed(x, design, windows, target, confidence) or math.inf for x in noise)
        runs = needed[len(noise) // 2]
        cost = runs * sum(x.run_cost_s + windows * x.window_cost_s for x in noise)
        if runs <= MOST_ROUNDS and (best is None or cost < best[0]):
            best = (cost, windows, runs)
    return None if best is None else best[1:]


def _finite(x: float) -> float | None:
    """A half-width for the record: none where the design leaves no degree of freedom (JSON has no
    infinity)."""
    return x if math.isfinite(x) else None


def plan(machine_dir: Path, profile: dict, design: Design, runs: int, max_runs: int | None, target: float,
         confidence: float, k: int = load.WINDOW_STEPS) -> dict | None:
    """The batch record's ``allocation``: the history's components per case, the half-width the
    pinned steps and rounds reach, and the least-time allocation for ``target``. None without a
    history of this set-up and design on the machine."""
    noise = case_noise(read_history(machine_dir, profile, design, k), design, k)
    if not noise:
        return None
    windows_now = max(1, int(profile["measure_steps"]) // k)
    rounds_now = max_runs or runs
    chosen = allocate(noise, design, target, confidence)
    cost = lambda w, r: r * sum(x.run_cost_s + w * x.window_cost_s for x in noise)  # noqa: E731
    return {
        "design": design.name, "pairs": design.pairs, "window_steps": k, "target_half_width": target, "confidence": confidence,
        "cases": [{**asdict(x), "half_width_now": _finite(half_width(x, design, windows_now, rounds_now, confidence)),
                   "window_share_now": x.window_sd ** 2 / windows_now / max(1e-12, x.levels().per_run(windows_now))}
                  for x in noise],
        "now": {"measure_steps": windows_now * k, "runs": rounds_now,
                "median_half_width": _finite(float(np.median([half_width(x, design, windows_now, rounds_now,
                                                                         confidence) for x in noise]))),
                "machine_s": cost(windows_now, rounds_now)},
        "least_time": None if chosen is None else {
            "measure_steps": chosen[0] * k, "runs": chosen[1], "machine_s": cost(*chosen),
            "median_half_width": float(np.median([half_width(x, design, *chosen, confidence) for x in noise]))},
    }


def width_text(x: float | None) -> str:
    return "n/a (too few runs for an interval)" if x is None else f"+-{x:.1%}"


def text(p: dict | None) -> list[str]:
    """What the plan says, a line each."""
    if p is None:
        return ["allocation: no earlier runs of this set-up and design on this machine, so no measured spread "
                "to plan from yet (Kalibera and Jones: the next batch's plan uses this one's)"]
    now, best = p["now"], p["least_time"]
    counts = sorted({x["runs"] for x in p["cases"]})
    lines = [f"allocation ({p['design']}, from {'-'.join(str(n) for n in counts[::max(1, len(counts) - 1)])} earlier "
             f"{'pairs' if p['pairs'] else 'runs'} a case on this machine): at {now['measure_steps']} steps a case the "
             f"spread between a run's {p['window_steps']}-step windows is "
             f"{np.median([x['window_share_now'] for x in p['cases']]):.0%} of a run's (median case); "
             f"{now['runs']} runs a side reach about "
             f"{width_text(now['median_half_width'])} (median case, at {p['confidence']:.0%})"]
    if best is None:
        lines.append(f"allocation: no measured length and rounds within {MOST_WINDOWS * p['window_steps']} steps and "
                     f"{MOST_ROUNDS} runs a side reach +-{p['target_half_width']:.1%}")
    else:
        lines.append(f"allocation: the least machine time for +-{p['target_half_width']:.1%} is {best['measure_steps']} "
                     f"steps a case and {best['runs']} runs a side (about {best['machine_s'] / 60:.0f} min of "
                     f"machine time a side; pinned: {now['measure_steps']} steps, about "
                     f"{now['machine_s'] / 60:.0f} min)"
                     + ("" if best["measure_steps"] == now["measure_steps"] else
                        f"; pin measure_steps = {best['measure_steps']} in the profile to use it"))
    return lines
