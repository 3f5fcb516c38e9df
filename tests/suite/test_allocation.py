"""Steps and rounds planned from a machine's stored runs (mbaphases.allocation): the levels of a
pair's log ratio recovered from runs made of known levels, the costs read from the runs' times,
and the least-time allocation checked against every allocation priced one by one."""
import json
import math

import numpy as np
import pytest

from mbaphases import allocation

PROFILE = {"num_envs": 64, "warmup_steps": 10, "measure_steps": 100, "replay_capacity_steps": 64,
           "torch_threads": 2, "overrides": ["sim.nthread=1"]}
CASE = {"algo": "sac", "task": "g1_walk_flat", "sim": "mujoco"}


def write_run(machine, commit, run, steps_ms, started, ended, duet=None, profile=PROFILE):
    """A stored run as the runner keeps it: its meta and its entry JSON with per-step samples
    (the active time all in env_step)."""
    folder = machine / commit
    folder.mkdir(parents=True, exist_ok=True)
    zeros = [0.0] * len(steps_ms)
    result = {"case": CASE, "phase_ms_per_vector_step": {
        "env_step_ms": {"samples_ms": list(map(float, steps_ms))}, "replay_ms": {"samples_ms": zeros},
        "bookkeeping_ms": {"samples_ms": zeros}}}
    (folder / f"run{run}.json").write_text(json.dumps({"results": [result]}))
    meta = {"commit": commit, "run": run, "batch": "B1", "started": started, "ended": ended, "profile": profile,
            **({"duet": duet} if duet else {})}
    (folder / f"run{run}.meta.json").write_text(json.dumps(meta))


def test_a_pairs_levels_and_costs_come_back_from_runs_of_known_levels(tmp_path):
    """Duet pairs on one CPU, two sides 5% apart: each window of 10 steps off by a 3% draw per
    side, each pair by a 1% draw beyond its windows. The window level of the pairs' log ratio is
    both sides' (3% x sqrt 2), the pair level 1%; a run's own cost is its wall per case, halved
    for the shared CPU, plus the CPU's wait before it, less its window."""
    rng = np.random.default_rng(5)
    machine = tmp_path / "box"
    windows, pairs, t = 10, 150, 0.0
    drawn_pair = []
    for k in range(pairs):
        pair_effect = rng.normal(0, 0.01)
        drawn_pair.append(pair_effect)
        for role, (commit, level) in enumerate((("a" * 40, 0.0), ("b" * 40, 0.05 + pair_effect))):
            steps = np.repeat(np.exp(np.log(5.0) + level + rng.normal(0, 0.03, windows)), 10)
            # both sides of the pair start together and end 12 s later; 3 s between pairs
            write_run(machine, commit, k + 1, steps, t, t + 12.0,
                      {"pair": f"B1/r{k}p1", "cpu": 0, "share_cpu": True, "role": role})
        t += 15.0
    design = allocation.design_of(True, True, "star", 2)
    plan = allocation.plan(machine, {**PROFILE, "measure_steps": 100}, design, 4, None, 0.03, 0.90)
    (case,) = plan["cases"]
    assert case["case"] == "sac/g1_walk_flat/mujoco" and case["runs"] == pairs
    assert case["window_sd"] == pytest.approx(0.03 * math.sqrt(2), rel=0.08)
    assert case["run_sd"] == pytest.approx(np.std(drawn_pair, ddof=1), rel=0.35)
    # (12 s + 3 s between) / 2 sides on the CPU - 0.5 s of window (100 steps of 5-5.25 ms)
    assert case["run_cost_s"] == pytest.approx(7.5 - 0.5, abs=0.05)
    assert case["window_cost_s"] == pytest.approx(0.05 * math.exp(0.025), rel=0.03)  # the two sides between


def test_a_plan_without_degrees_of_freedom_is_valid_json(tmp_path):
    """One round of a round-robin of six sides leaves its block fit no degree of freedom: the
    plan says so (no half-width) and its record is strict JSON, with no infinity in it."""
    machine = tmp_path / "box"
    rng = np.random.default_rng(3)
    for k in range(6):  # two sides, six pairs: a history to plan from
        for role, commit in enumerate(("a" * 40, "b" * 40)):
            write_run(machine, commit, k + 1, np.repeat(np.exp(np.log(5.0) + rng.normal(0, 0.03, 10)), 10),
                      20.0 * k, 20.0 * k + 10, {"pair": f"B1/r{k}p1", "cpu": 0, "share_cpu": True, "role": role})
    design = allocation.design_of(True, True, "round-robin", 6)
    plan = allocation.plan(machine, PROFILE, design, 1, None, 0.03, 0.95)
    assert plan["now"]["median_half_width"] is None and plan["cases"][0]["half_width_now"] is None
    json.loads(json.dumps(plan, allow_nan=False))
    assert "n/a (too few runs for an interval)" in allocation.text(plan)[0]


def test_runs_of_another_setup_or_design_plan_nothing(tmp_path):
    """A history measured at other envs, or alone where the batch runs duets, says nothing of
    this batch's spread: no plan, and the line says why."""
    machine = tmp_path / "box"
    for k in range(4):
        write_run(machine, "a" * 40, k + 1, np.full(100, 5.0), 10.0 * k, 10.0 * k + 5)
        write_run(machine, "b" * 40, k + 1, np.full(100, 5.0), 10.0 * k, 10.0 * k + 5,
                  profile={**PROFILE, "num_envs": 8})
    duet = allocation.design_of(True, False, "star", 2)
    assert allocation.plan(machine, PROFILE, duet, 4, None, 0.03, 0.9) is None
    assert "no earlier runs of this set-up and design" in allocation.text(None)[0]


def test_the_least_time_allocation_is_the_cheapest_that_reaches_the_target():
    """Priced one by one over every windows-and-runs pair: the cheapest whose median case is
    within the target is the one allocate() names; and a run that costs nothing beyond its
    window (no start-up) is never worth fewer windows than a dear one."""
    cases = [allocation.CaseNoise("c1", 0.08, 0.005, 1.0, 0.2, 10),
             allocation.CaseNoise("c2", 0.15, 0.0, 2.0, 0.1, 10),
             allocation.CaseNoise("c3", 0.06, 0.02, 0.5, 0.25, 10)]
    design = allocation.design_of(True, True, "round-robin", 6)
    target, confidence = 0.03, 0.95
    priced = []
    for w in range(1, allocation.MOST_WINDOWS + 1):
        for r in range(2, allocation.MOST_ROUNDS + 1):
            widths = [allocation.half_width(x, design, w, r, confidence) for x in cases]
            if np.median(widths) <= target:
                priced.append((r * sum(x.run_cost_s + w * x.window_cost_s for x in cases), w, r))
    cheapest = min(priced)
    w, r = allocation.allocate(cases, design, target, confidence)
    assert r * sum(x.run_cost_s + w * x.window_cost_s for x in cases) == pytest.approx(cheapest[0])
    cheap_start = [allocation.CaseNoise(x.case, x.window_sd, x.run_sd, 0.0, x.window_cost_s, 10) for x in cases]
    assert allocation.allocate(cheap_start, design, target, confidence)[0] <= w


def test_a_round_robin_costs_each_comparison_more_pairs_than_a_direct_pair():
    """Six sides in a round-robin meet every two once in five rounds: a comparison's variance per
    round is 2 x 5/6 of one pair's, and its block fit has 3 pairs a round less 5 sides' effects."""
    rr = allocation.design_of(True, True, "round-robin", 6)
    star = allocation.design_of(True, True, "star", 6)
    assert rr.per_side_var == pytest.approx(5 / 3) and star.per_side_var == 1.0
    assert rr.df(5) == 10 and star.df(5) == 4 and allocation.design_of(False, False, "star", 2).df(5) == 8
    noise = allocation.CaseNoise("c", 0.1, 0.0, 1.0, 0.1, 10)
    assert allocation.half_width(noise, rr, 10, 1, 0.9) == math.inf  # no degree of freedom left
