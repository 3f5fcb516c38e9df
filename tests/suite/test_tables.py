"""mbaphases tables and gate against hand-computed values."""
import itertools
import json
import math
import subprocess
import sys

import entry_docs as E
import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from mbaphases import analysis, gate, ledger, load, tables, views
from mbaphases.stats import intervals, rules

CASE_A, CASE_B = "sac/g1_walk_flat/mujoco", "sac/g1_walk_flat/motrix"


def side_files(tmp_path, name, per_run):
    """per_run: list of {case: kwargs for case_result} (or an 'errors' list)."""
    paths = []
    for k, cases in enumerate(per_run, 1):
        errors = cases.pop("errors", [])
        results = [E.case_result(c, **kw) for c, kw in cases.items()]
        paths.append(E.write(tmp_path / f"{name}_run{k}.json", E.doc(results, errors)))
    return paths


def env_step_for(thr, replay=0.6, bookkeeping=0.4):
    return E.active_for_throughput(thr) - replay - bookkeeping


def test_throughput_medians_ranges_ratio_and_ties(tmp_path):
    # baseline throughputs 1000, 1000, 1250 (a tie); candidate 800, 1000, 900
    bt, ct = [1000, 1000, 1250], [800, 1000, 900]
    b = load.load_raw_side("base", side_files(tmp_path, "b", [{CASE_A: {"env_step": env_step_for(t)}} for t in bt]))
    c = load.load_raw_side("cand", side_files(tmp_path, "c", [{CASE_A: {"env_step": env_step_for(t)}} for t in ct]))
    t = tables.throughput_table(b, c, [CASE_A]).iloc[0]
    assert t.baseline_median == pytest.approx(1000) and t.baseline_min == pytest.approx(1000)
    assert t.baseline_max == pytest.approx(1250) and t.candidate_median == pytest.approx(900)
    assert t.ratio == 0.9 and t.baseline_runs == 3
    d = tables.dispersion_table(b, c, [CASE_A]).set_index("side")
    assert d.loc["baseline", "range_pct"] == pytest.approx(0.25)
    assert d.loc["baseline", "cv"] == pytest.approx(np.std(bt) / np.mean(bt))
    assert d.loc["baseline", "wide"] and d.loc["candidate", "range_pct"] == pytest.approx(200 / 900)
    # worst pairing 800/1250 = 0.64 < 0.9 < best 1000/1000: inconclusive
    rows = gate.evaluate(b, c, [CASE_A], 0.9, 3, {})
    assert rows[0]["gate"] == "INCONCLUSIVE"
    assert rows[0]["lower"] == pytest.approx(0.64) and rows[0]["upper"] == pytest.approx(1.0)
    assert rows[0]["k"] == 1 and rows[0]["coverage"] == pytest.approx(0.9)


@pytest.mark.parametrize("bt, ct, expected", [
    ([1000, 1010, 990], [950, 960, 955], "PASS"),   # 950/1010 = 0.941 >= 0.9
    ([1000, 1010, 990], [800, 850, 880], "FAIL"),   # 880/990 = 0.889 < 0.9
    ([1000, 1000, 1000], [900, 900, 900], "PASS"),  # exactly at the threshold clears it
])
def test_gate_interval_rule(tmp_path, bt, ct, expected):
    b = load.load_raw_side("b", side_files(tmp_path, "b", [{CASE_A: {"env_step": env_step_for(t)}} for t in bt]))
    c = load.load_raw_side("c", side_files(tmp_path, "c", [{CASE_A: {"env_step": env_step_for(t)}} for t in ct]))
    assert gate.evaluate(b, c, [CASE_A], 0.9, 3, {})[0]["gate"] == expected


def test_phases_and_attribution_add_up(tmp_path):
    base = dict(env_step=9.0, physics=6.0, step_core=6.5, update_state=1.5, reset_done=0.5, replay=0.6, bookkeeping=0.4)
    cand = dict(env_step=12.0, physics=7.0, step_core=7.8, update_state=2.9, reset_done=1.0, replay=0.7, bookkeeping=0.5)
    b = load.load_raw_side("b", side_files(tmp_path, "b", [{CASE_A: dict(base)} for _ in range(3)]))
    c = load.load_raw_side("c", side_files(tmp_path, "c", [{CASE_A: dict(cand)} for _ in range(3)]))
    p = tables.phase_table(b, c, [CASE_A]).iloc[0]
    assert p.update_state_ms_baseline == pytest.approx(1.5) and p.update_state_ms_candidate == pytest.approx(2.9)
    assert p.resets_per_step_baseline == pytest.approx(1.0)
    a = tables.attribution_table(b, c, [CASE_A])[0].iloc[0]
    # active 10.0 -> 13.2 ms: +3.2 = physics +1 + (step_core-physics) +0.3 + update_state +1.4
    #   + reset_done +0.5 + env_step rest (0.5 -> 0.3) -0.2 + replay +0.1 + bookkeeping +0.1
    assert a.delta_active_median_ms == pytest.approx(3.2) and a.delta_sum_ms == pytest.approx(3.2)
    expected = {"physics": 1.0, "step_core_minus_physics": 0.3, "update_state": 1.4, "reset_done": 0.5,
                "env_step_rest": -0.2, "replay": 0.1, "bookkeeping": 0.1}
    for k, v in expected.items():
        assert a[f"{k}_ms"] == pytest.approx(v)
        assert a[f"{k}_share"] == pytest.approx(v / 3.2)


def test_physics_not_reported_is_na(tmp_path):
    b = load.load_raw_side("b", side_files(tmp_path, "b", [{CASE_A: {"physics": None}} for _ in range(3)]))
    c = load.load_raw_side("c", side_files(tmp_path, "c", [{CASE_A: {"physics": None}} for _ in range(3)]))
    rep = analysis.build(b, c, min_runs=3)
    assert rep.phases.iloc[0].physics_ms_baseline is None
    view = views.view_tables(rep)
    assert view["phases"].iloc[0]["physics"] == "n/a → n/a"
    assert rep.attribution.iloc[0]["physics_ms"] is None
    assert rep.attribution.iloc[0]["step_core_minus_physics_ms"] == pytest.approx(0.0)


def test_failed_run_misaligned_config_and_exceptions(tmp_path):
    ok = {CASE_A: {}, CASE_B: {}}
    b_runs = [dict(ok), dict(ok), {CASE_A: {}, "errors": [{"case": CASE_B, "type": "RuntimeError", "message": "boom"}]}]
    b = load.load_raw_side("b", side_files(tmp_path, "b", b_runs))
    c = load.load_raw_side("c", side_files(tmp_path, "c", [{CASE_A: {"obs_dim": 50}, CASE_B: {}} for _ in range(3)]))
    rows = {r["case"]: r for r in gate.evaluate(b, c, [CASE_A, CASE_B], 0.9, 3, {})}
    assert rows[CASE_B]["gate"] == "MISSING" and "b_run3.json" in rows[CASE_B]["note"]
    assert rows[CASE_A]["gate"] == "MISALIGNED" and "obs_dim" in rows[CASE_A]["note"]
    assert gate.verdict(list(rows.values())) == "INCOMPLETE"
    # an exception with an own threshold: the rule applies at that threshold
    slow = load.load_raw_side("s", side_files(tmp_path, "s", [{CASE_A: {"env_step": env_step_for(t)}} for t in (700, 710, 720)]))
    base = load.load_raw_side("n", side_files(tmp_path, "n", [{CASE_A: {"env_step": env_step_for(t)}} for t in (1000, 1000, 1000)]))
    excs = {CASE_A: gate.Exception_(CASE_A, "known drift", 0.65)}
    assert gate.evaluate(base, slow, [CASE_A], 0.9, 3, excs)[0]["gate"] == "EXCEPTED"
    excs = {CASE_A: gate.Exception_(CASE_A, "known drift", 0.8)}
    r = gate.evaluate(base, slow, [CASE_A], 0.9, 3, excs)[0]
    assert r["gate"] == "FAIL" and "does not clear" in r["note"]
    assert gate.evaluate(base, slow, [CASE_A], 0.9, 3, {CASE_A: gate.Exception_(CASE_A, "accepted")})[0]["gate"] == "EXCEPTED"


def test_rank_test_only_from_five_runs(tmp_path):
    bt, ct = [1000, 1010, 990, 1005, 995], [700, 710, 690, 705, 695]
    b = load.load_raw_side("b", side_files(tmp_path, "b", [{CASE_A: {"env_step": env_step_for(t)}} for t in bt]))
    c = load.load_raw_side("c", side_files(tmp_path, "c", [{CASE_A: {"env_step": env_step_for(t)}} for t in ct]))
    r = gate.evaluate(b, c, [CASE_A], 0.9, 3, {})[0]
    assert r["gate"] == "FAIL" and r["p_value"] == pytest.approx(1 / 252, rel=1e-6)  # exact 5 vs 5, one-sided
    b3 = load.load_raw_side("b3", side_files(tmp_path, "b3", [{CASE_A: {"env_step": env_step_for(t)}} for t in bt[:3]]))
    assert gate.evaluate(b3, c, [CASE_A], 0.9, 3, {})[0]["p_value"] is None


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mbaphases.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_cli_writes_report_files_and_exit_status(tmp_path):
    b = side_files(tmp_path, "b", [{CASE_A: {"env_step": env_step_for(t)}} for t in (1000, 1010, 990)])
    c = side_files(tmp_path, "c", [{CASE_A: {"env_step": env_step_for(t)}} for t in (950, 960, 955)])
    out = tmp_path / "rep"
    p = run_cli("report", "--out", str(out), "--baseline-raw", *b, "--candidate-raw", str(tmp_path / "c_run*.json"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["verdict"] == "PASS" and s["threshold"] == 0.9
    case = s["cases"][0]
    assert case["case"] == CASE_A and case["gate"] == "PASS"
    assert case["throughput"]["baseline"]["runs"] == 3
    assert case["throughput"]["baseline"]["median"] == pytest.approx(1000)
    assert case["throughput"]["candidate"]["median"] == pytest.approx(955)
    assert case["throughput"]["ratio"] == 0.955
    assert set(case["phases_ms"]["update_state"]) == {"baseline", "candidate"}
    for f in ("report.md", "throughput.csv", "phases.csv", "attribution.csv", "dispersion.csv", "gate.csv", "environment.csv"):
        assert (out / f).stat().st_size > 0
    md = (out / "report.md").read_text()
    assert "1,000 [990, 1,010]" in md and "Verdict: PASS" in md
    p = run_cli("report", "--out", str(out), "--baseline-raw", *b, "--candidate-raw", *c, "--threshold", "0.99", cwd=tmp_path)
    assert p.returncode == 1 and json.loads((out / "summary.json").read_text())["verdict"] == "FAIL"


@pytest.mark.parametrize("make, needle", [
    (lambda d: d / "missing.json", "missing.json"),
    (lambda d: (d / "bad.json").write_text("{not json") and d / "bad.json", "bad.json is not valid JSON"),
    (lambda d: (d / "nan.json").write_text(json.dumps(E.doc([E.case_result(CASE_A)])).replace(
        '"collector_active_steps_per_sec": 10000.0', '"collector_active_steps_per_sec": NaN')) and d / "nan.json",
     "collector_active_steps_per_sec of sac/g1_walk_flat/mujoco is None"),
    (lambda d: (d / "other.json").write_text("{}") and d / "other.json", "not an offpolicy_collector_active"),
])
def test_bad_raw_input_is_one_line(tmp_path, make, needle):
    good = side_files(tmp_path, "g", [{CASE_A: {}}])
    bad = make(tmp_path)
    p = run_cli("report", "--out", str(tmp_path / "r"), "--baseline-raw", *good, "--candidate-raw", str(bad), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr


def test_mixed_pinned_parameters_in_a_side_are_refused(tmp_path):
    a = E.write(tmp_path / "a.json", E.doc([E.case_result(CASE_A)], num_envs=100))
    b = E.write(tmp_path / "b.json", E.doc([E.case_result(CASE_A, num_envs=200)], num_envs=200))
    p = run_cli("report", "--out", str(tmp_path / "r"), "--baseline-raw", a, b, "--candidate-raw", a, cwd=tmp_path)
    assert p.returncode == 2 and "mixes pinned parameters" in p.stderr


# --- the distribution-free interval ------------------------------------------------------------

def brute_interval(b, c, confidence):
    """Independent: the exact null distribution of U by enumerating every assignment."""
    m, n = len(b), len(c)
    counts = [0] * (m * n + 1)
    for cand in itertools.combinations(range(m + n), n):
        chosen = set(cand)
        counts[sum(1 for j in cand for i in range(m + n) if i not in chosen and i < j)] += 1
    total = math.comb(m + n, m)
    k = max(k for k in range(1, m * n // 2 + 1) if 1 - 2 * sum(counts[:k]) / total >= confidence - 1e-12)
    ratios = sorted(cj / bi for bi in b for cj in c)
    return ratios[k - 1], ratios[-k], k


@pytest.mark.parametrize("b, c, k", [
    ([1000, 1010, 990], [950, 960, 955], 1),                       # 3 vs 3: the seed's rule
    ([1000, 1010, 990], [950, 960, 955, 940, 970], 2),             # 3 vs 5
    ([1000, 1010, 990, 1005, 995], [950, 960, 955, 940, 970], 5),  # 5 vs 5: 5th of 25
    ([1000, 1000, 1010, 990, 1000], [950, 950, 960, 950, 970], 5),  # ties
])
def test_interval_matches_hand_and_independent_computation(b, c, k):
    iv = intervals.ratio_interval(b, c, 0.90)
    lo, hi, bk = brute_interval(b, c, 0.90)
    assert iv.k == bk == k and iv.lower == pytest.approx(lo) and iv.upper == pytest.approx(hi)
    if k == 1:
        assert iv.lower == pytest.approx(min(c) / max(b)) and iv.upper == pytest.approx(max(c) / min(b))


def test_interval_10_vs_10_against_scipy_exact_test():
    rng = np.random.default_rng(3)
    b, c = 1000 * (1 + 0.03 * rng.standard_normal(10)), 950 * (1 + 0.03 * rng.standard_normal(10))
    iv = intervals.ratio_interval(b, c, 0.90)
    assert iv.k == 28 and iv.coverage == pytest.approx(0.9108, abs=1e-4)
    # the interval's ends are where the exact one-sided test at (1 - coverage) / 2 stops rejecting
    alpha = (1 - iv.coverage) / 2
    inside = mannwhitneyu(c / (iv.lower * 1.0001), b, alternative="less", method="exact").pvalue
    outside = mannwhitneyu(c / (iv.lower * 0.999), b, alternative="greater", method="exact").pvalue
    assert inside > alpha - 1e-9 and outside <= alpha + 1e-9


def test_more_runs_decide_what_three_could_not(tmp_path):
    # about 4% run-to-run spread, a true ratio near 0.96
    bt = [1040, 1000, 960, 1020, 980, 1030, 970, 1010, 990, 1000]
    ct = [930, 990, 960, 975, 945, 985, 935, 965, 955, 960]
    b3 = load.load_raw_side("b", side_files(tmp_path, "b3", [{CASE_A: {"env_step": env_step_for(t)}} for t in bt[:3]]))
    c3 = load.load_raw_side("c", side_files(tmp_path, "c3", [{CASE_A: {"env_step": env_step_for(t)}} for t in ct[:3]]))
    r3 = gate.evaluate(b3, c3, [CASE_A], 0.9, 3, {})[0]
    assert r3["gate"] == "INCONCLUSIVE" and r3["runs_needed"] > 3
    b10 = load.load_raw_side("b", side_files(tmp_path, "b10", [{CASE_A: {"env_step": env_step_for(t)}} for t in bt]))
    c10 = load.load_raw_side("c", side_files(tmp_path, "c10", [{CASE_A: {"env_step": env_step_for(t)}} for t in ct]))
    r10 = gate.evaluate(b10, c10, [CASE_A], 0.9, 3, {})[0]
    assert r10["gate"] == "PASS" and r10["lower"] >= 0.9
    assert r10["upper"] / r10["lower"] < r3["upper"] / r3["lower"], "more runs narrow the interval"


def test_two_batches_of_one_commit_with_a_shift_are_drift(tmp_path):
    def batch_side(values_by_batch):
        paths = []
        for batch, values in values_by_batch.items():
            for k, t in enumerate(values):
                p = side_files(tmp_path, f"{batch}_{k}", [{CASE_A: {"env_step": env_step_for(t)}}])[0]
                (tmp_path / f"{batch}_{k}_run1.meta.json").write_text(json.dumps({"batch": batch}))
                paths.append(p)
        return load.load_raw_side("s", paths)

    shifted = batch_side({"batch-A": [1000, 1010, 995], "batch-B": [1300, 1310, 1290]})
    drift, text = tables.batch_drift(shifted, CASE_A)
    assert drift and "batch-A" in text and "batch-B" in text
    steady = batch_side({"batch-C": [1000, 1010, 995], "batch-D": [1005, 990, 1012]})
    assert tables.batch_drift(steady, CASE_A)[0] is False


# --- many candidates: the ledger and additivity -------------------------------------------------

def phase_side(tmp_path, name, per_run_phases):
    return load.load_raw_side(name, side_files(tmp_path, name, [{CASE_A: dict(p)} for p in per_run_phases]))


BASE = dict(env_step=9.0, physics=6.0, step_core=6.5, update_state=1.5, reset_done=0.5, replay=0.6, bookkeeping=0.4)


def test_ledger_splits_each_candidates_change_by_phase(tmp_path):
    dev = phase_side(tmp_path, "dev", [BASE] * 3)
    # faster physics by 1 ms (env_step and step_core move with it)
    opt = phase_side(tmp_path, "opt", [{**BASE, "physics": 5.0, "step_core": 5.5, "env_step": 8.0}] * 3)

    row = ledger.ledger_table(dev, [opt], [CASE_A])[0].iloc[0]
    assert row.delta_sum_ms == pytest.approx(-1.0) and row.physics_ms == pytest.approx(-1.0)
    assert row.update_state_ms == pytest.approx(0.0) and row.reset_done_ms == pytest.approx(0.0)
    # throughput 100 envs / active ms: 10 ms -> 9 ms
    assert row.ratio == pytest.approx(round(10 / 9, 3))




def test_a_window_not_in_steady_state_is_transient(tmp_path):
    """The first third of the measured steps 30% slower than the rest: TRANSIENT, with the
    suggestion; the gated figure (steps over active time) is unchanged by the check."""
    def runs(name, first_slow):
        paths = []
        for k in range(3):
            r = E.case_result(CASE_A, measure=30)
            steps = [9.0 * (1.3 if first_slow and i < 10 else 1.0) for i in range(30)]
            r["phase_ms_per_vector_step"]["env_step_ms"] = E.stats(steps)
            paths.append(E.write(tmp_path / f"{name}_run{k}.json", E.doc([r], measure=30)))
        return load.load_raw_side(name, paths)

    b, c = runs("b", False), runs("c", True)
    # per-step active time: env_step + replay (0.6) + bookkeeping (0.4)
    assert tables.per_run(c, "step_trend", CASE_A) == pytest.approx([(9.0 * 1.3 + 1.0) / 10.0] * 3)
    d = tables.dispersion_table(b, c, [CASE_A]).set_index("side")
    assert d.loc["candidate", "transient"] and not d.loc["baseline", "transient"]
    assert d.loc["baseline", "first_last"] == pytest.approx(1.0)
    rep = analysis.build(b, c, min_runs=3)
    assert "TRANSIENT" in views.view_tables(rep)["dispersion"].flag.iloc[1]
    assert "more warmup steps" in views.decision_section(rep)
    assert rep.throughput.iloc[0].candidate_median == pytest.approx(rep.throughput.iloc[0].baseline_median)


def test_a_side_without_physics_time_keeps_physics_inside_step_core_on_both(tmp_path):
    # the baseline's backend reports no physics time (an older release); step_core 6.5 ms on both sides
    b = load.load_raw_side("old", side_files(tmp_path, "b", [{CASE_A: {"physics": None}} for _ in range(3)]))
    c = load.load_raw_side("new", side_files(tmp_path, "c", [{CASE_A: {"physics": 6.0}} for _ in range(3)]))
    row = tables.attribution_table(b, c, [CASE_A])[0].iloc[0]
    # compared like with like: no change, rather than -6.0 ms of "step_core minus physics"
    assert row["step_core_minus_physics_ms"] == pytest.approx(0.0)
    assert row["physics_ms"] is None or np.isnan(row["physics_ms"])
    assert row["delta_sum_ms"] == pytest.approx(row["delta_active_median_ms"])


def test_each_gate_row_says_whether_its_verdict_holds_without_the_flagged_runs(tmp_path):
    """Runs flagged BUSY stay in the verdict; the row says what it would be without them, and
    the decision section lists the cases whose verdict depends on them."""
    bt, ct = [1000, 1010, 990, 1005], [950, 960, 955, 700]
    b = load.load_raw_side("b", side_files(tmp_path, "b", [{CASE_A: {"env_step": env_step_for(t)},
                                                             CASE_B: {"env_step": env_step_for(t)}} for t in bt]))
    c = load.load_raw_side("c", side_files(tmp_path, "c", [{CASE_A: {"env_step": env_step_for(t)},
                                                             CASE_B: {"env_step": env_step_for(t + 250)}}
                                                            for t in ct]))
    slow = sorted(c.values.run.unique())[-1]  # the candidate's 700 run
    c.run_flags = {slow: ["machine busy during the run (42% of CPUs used by other processes)"]}
    rep = analysis.build(b, c, 0.9, 3)
    g = rep.gate.set_index("case")
    # with the disturbed run: 700/1010 stretches the interval below 0.9; without it 950/1010 clears
    assert g.loc[CASE_A, "gate"] == "INCONCLUSIVE" and g.loc[CASE_A, "without_flagged"] == "PASS"
    assert g.loc[CASE_B, "gate"] == "PASS" and g.loc[CASE_B, "without_flagged"] == "PASS"
    assert g.loc[CASE_A, "flagged_runs"] == 1
    view = views.view_tables(rep)["gate"].set_index("case")
    assert view.loc[CASE_A, "without flagged runs"] == "PASS (1 flagged run left out)"
    assert view.loc[CASE_B, "without flagged runs"] == "same (1 flagged run left out)"
    block = views.decision_section(rep)
    assert f"`{CASE_A}` INCONCLUSIVE → PASS" in block and f"`{CASE_B}`" not in block.split("depend on runs")[1]
    # a side without flagged runs: the column stays empty
    c.run_flags = {}
    assert analysis.build(b, c, 0.9, 3).gate.without_flagged.isna().all()


def test_runs_in_two_states_are_named_as_two_modes_with_their_runs(tmp_path):
    """reset_done 4-8 ms a step in some runs and 16-23 in others (as a release's motion tracking
    ran): MODES, each mode's median and which runs fall in it; one spread of runs is not modes."""
    two_states = [5.0, 19.0, 7.5, 16.0, 6.0, 23.0]
    b = phase_side(tmp_path, "b", [{**BASE, "reset_done": r, "env_step": 8.5 + r} for r in two_states])
    c = phase_side(tmp_path, "c", [{**BASE, "reset_done": 0.5 + 0.1 * k} for k in range(6)])
    d = tables.dispersion_table(b, c, [CASE_A]).set_index("side")
    runs = sorted(b.values.run.unique(), key=lambda r: tables.per_run_map(b, "reset_done_ms", CASE_A)[r])
    low, high = runs[:3], runs[3:]
    text = d.loc["baseline", "modes"]
    assert text.startswith("throughput:") and "reset_done: 6 ms (runs " in text and "and 19 ms (runs " in text
    reset = text.split("reset_done: ")[1]
    assert all(r in reset.split(" and ")[0] for r in low) and all(r in reset.split(" and ")[1] for r in high)
    assert d.loc["candidate", "modes"] == ""
    view = views.view_tables(analysis.build(b, c, min_runs=3))["dispersion"].set_index("side")
    assert "MODES" in view.loc["baseline", "flag"] and "MODES" not in view.loc["candidate", "flag"]


@pytest.mark.parametrize("values, split", [
    ([1.0, 1.01, 1.05, 1.06], None),                  # two pairs, but 5% apart: noise, not modes
    ([1.0, 1.1, 1.2, 1.3, 1.4, 1.5], None),           # one even spread
    ([10, 10.5, 11, 20, 21], ([0, 1, 2], [3, 4])),
    ([10, 20, 21, 22], None),                         # one run apart is an outlier, not a mode
])
def test_the_two_modes_rule(values, split):
    got = rules.two_modes({str(i): v for i, v in enumerate(values)})
    assert got == (None if split is None else tuple([str(i) for i in s] for s in split))
