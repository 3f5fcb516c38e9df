"""The intervals of mbaphases.stats against independent computations (brute force over
label permutations and pairs, scipy), on hand-made data with known effects."""
import itertools
import json
import math
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import entry_docs as E
import numpy as np
import pytest
from scipy import stats

from mbaphases import analysis, cli, comparable, find, ledger, load, tables, turn_bias, until_decisive, views
from mbaphases import gate as gate_mod
from mbaphases.run import design
from mbaphases.stats import blocks, components, intervals, rules

CASE = "sac/g1_walk_flat/mujoco"


# --- independent computations -----------------------------------------------------------------

def brute_null(sizes):
    """P(T = t) of T = sum_s U_s / (m_s + n_s + 1) by enumerating every labelling within each
    stratum (no recursion, no convolution): {t rounded: probability}."""
    per = []
    for m, n in sizes:
        counts = {}
        for cand in itertools.combinations(range(m + n), n):
            u = sum(1 for j in cand for i in range(m + n) if i not in cand and j > i)
            counts[u] = counts.get(u, 0) + 1
        total = sum(counts.values())
        per.append({Fraction(u, m + n + 1): Fraction(c, total) for u, c in counts.items()})
    dist = {Fraction(0): Fraction(1)}
    for p in per:
        nxt = {}
        for a, pa in dist.items():
            for b, pb in p.items():
                nxt[a + b] = nxt.get(a + b, 0) + pa * pb
        dist = nxt
    return {float(k): float(v) for k, v in dist.items()}


def brute_interval(blocks, confidence, log=True):
    """Invert the stratified rank test on a grid of shifts: every shift between two pairwise
    differences is tried; the interval spans the accepted ones."""
    tr = np.log if log else (lambda x: np.asarray(x, dtype=float))
    sizes = [(len(b), len(c)) for b, c in blocks]
    dist = brute_null(sizes)
    values = sorted(dist)
    t_lo = None
    for t in values:
        if t > 0 and 1 - 2 * sum(p for v, p in dist.items() if v < t - 1e-12) >= confidence - 1e-12:
            t_lo = t
    total = sum(m * n / (m + n + 1) for m, n in sizes)
    diffs = np.unique(np.concatenate([(tr(c)[None, :] - tr(b)[:, None]).ravel() for b, c in blocks]))
    grid = (diffs[:-1] + diffs[1:]) / 2

    def t_of(delta):
        return sum(((tr(c)[None, :] - delta) > tr(b)[:, None]).sum() / (len(b) + len(c) + 1) for b, c in blocks)

    accepted = [g for g in grid if t_lo - 1e-9 <= t_of(g) <= total - t_lo + 1e-9]
    lower = diffs[diffs < min(accepted)].max()
    upper = diffs[diffs > max(accepted)].min()
    back = np.exp if log else (lambda x: x)
    return float(back(lower)), float(back(upper)), 1 - 2 * sum(p for v, p in dist.items() if v < t_lo - 1e-12)


# --- the rank intervals ---------------------------------------------------------------------------

def test_one_batch_is_the_rule_of_three_runs_a_side():
    b, c = [1000.0, 1010.0, 990.0], [950.0, 960.0, 955.0]
    iv = intervals.ratio_interval(b, c, 0.90)
    assert iv.k == 1 and iv.coverage == pytest.approx(0.90)
    assert iv.lower == pytest.approx(950 / 1010) and iv.upper == pytest.approx(960 / 990)
    # the same through the stratified entry with a single block
    same = intervals.ratio_interval(b, c, 0.90, [(b, c)])
    assert (same.lower, same.upper, same.k) == (iv.lower, iv.upper, iv.k)


@pytest.mark.parametrize("m, n", [(3, 3), (4, 5), (6, 6)])
def test_one_stratum_interval_matches_the_mann_whitney_inversion_of_scipy(m, n):
    rng = np.random.default_rng(m * 10 + n)
    b, c = rng.normal(10, 1, m), rng.normal(9, 1, n)
    iv = intervals.difference_interval(b, c, 0.90)
    # scipy's exact two-sided Mann-Whitney test of c - delta vs b accepts exactly the shifts inside
    alpha = 1 - iv.coverage
    for delta in np.sort((c[None, :] - b[:, None]).ravel()):
        for eps, inside in ((-1e-7, iv.lower < delta - 1e-7 <= iv.upper), (1e-7, iv.lower <= delta + 1e-7 < iv.upper)):
            p = stats.mannwhitneyu(c - (delta + eps), b, alternative="two-sided", method="exact").pvalue
            assert (p > alpha + 1e-9) == inside, (delta + eps, p, iv)


def test_two_batches_with_a_shared_shift_match_a_hand_computation():
    # the second batch runs 25% faster on both sides; the candidate is 5% slower in both
    a_b, a_c = [1000.0, 1020.0, 990.0, 1010.0], [950.0, 965.0, 940.0, 962.0]
    b_b, b_c = [x * 1.25 for x in a_b], [x * 1.25 * 1.004 for x in a_c]
    blocks = [(a_b, a_c), (b_b, b_c)]
    iv = intervals.ratio_interval(a_b + b_b, a_c + b_c, 0.90, blocks)
    lower, upper, coverage = brute_interval(blocks, 0.90)
    assert iv.lower == pytest.approx(lower) and iv.upper == pytest.approx(upper)
    assert iv.coverage == pytest.approx(coverage) and iv.coverage >= 0.90 and iv.strata == 2
    own = [intervals.ratio_interval(x, y, 0.90) for x, y in blocks]
    width = math.log(iv.upper / iv.lower)
    assert width <= max(math.log(o.upper / o.lower) for o in own) + 1e-12
    assert own[0].lower <= iv.estimate <= own[1].upper
    # pooled over the batches, the shift between them swamps the difference
    pooled = intervals.ratio_interval(a_b + b_b, a_c + b_c, 0.90)
    assert math.log(pooled.upper / pooled.lower) > 3 * width


def test_three_unequal_batches_against_brute_force_and_the_p_value():
    rng = np.random.default_rng(7)
    blocks = [(rng.normal(100, 3, m) * s, rng.normal(92, 3, n) * s) for (m, n), s in
              (((3, 3), 1.0), ((2, 4), 1.3), ((4, 2), 0.8))]
    iv = intervals.difference_interval(np.concatenate([b for b, _ in blocks]),
                                      np.concatenate([c for _, c in blocks]), 0.80, blocks)
    lower, upper, coverage = brute_interval(blocks, 0.80, log=False)
    assert (iv.lower, iv.upper) == (pytest.approx(lower), pytest.approx(upper))
    assert iv.coverage == pytest.approx(coverage)
    dist = brute_null([(len(b), len(c)) for b, c in blocks])
    t = sum(((c[None, :] > 1.0 * b[:, None]).sum()) / (len(b) + len(c) + 1) for b, c in blocks)
    expected = sum(p for v, p in dist.items() if v <= t + 1e-9)
    assert intervals.stratified_p_less(blocks, 1.0) == pytest.approx(expected)


def test_many_runs_use_the_normal_approximation_near_its_exact_value():
    rng = np.random.default_rng(3)
    blocks = [(rng.normal(10, 1, 22), rng.normal(9, 1, 22)), (rng.normal(12, 1, 21), rng.normal(11, 1, 21))]
    iv = intervals.difference_interval(None, None, 0.90, blocks)
    assert iv.method == "normal" and iv.lower < -1.0 + 0.6 and iv.upper > -1.0 - 0.6
    assert iv.lower < iv.estimate < iv.upper


# --- the gate with batches ------------------------------------------------------------------------

def batch_runs(tmp_path, name, by_batch, host=None):
    paths = []
    for batch, values in by_batch.items():
        for k, thr in enumerate(values):
            doc = E.doc([E.case_result(CASE, env_step=E.active_for_throughput(thr) - 1.0)])
            if host:
                doc["provenance"] = {"host": host}
            p = E.write(tmp_path / f"{name}_{batch}_{k}.json", doc)
            (tmp_path / f"{name}_{batch}_{k}.meta.json").write_text(json.dumps({"batch": batch}))
            paths.append(p)
    return paths


def test_gate_stratifies_by_batch_and_leaves_out_a_batch_with_one_side(tmp_path):
    base = {"A": [1000, 1010, 995], "B": [1300, 1312, 1290], "C": [700, 710, 705]}
    cand = {"A": [960, 968, 955], "B": [1248, 1260, 1240]}
    b = load.load_raw_side("b", batch_runs(tmp_path, "b", base))
    c = load.load_raw_side("c", batch_runs(tmp_path, "c", cand))

    rep = analysis.build(b, c, threshold=0.90, min_runs=3)
    g = rep.gate.iloc[0]
    assert g.gate == "PASS" and g.strata == 2 and "stratified over 2 batches" in g.note
    assert any("batch C: only b ran in it" in n for n in rep.notes)
    assert rep.throughput.iloc[0].baseline_runs == 6
    blocks = [(base[k], cand[k]) for k in ("A", "B")]
    lower, upper, _ = brute_interval(blocks, 0.90)
    assert g.lower == pytest.approx(lower) and g.upper == pytest.approx(upper)


@pytest.mark.parametrize("n", [5, 8, 13])
def test_duet_pairs_interval_matches_the_signed_rank_inversion_of_scipy(n):
    """Strata of one run a side (duet pairs): the interval holds exactly the shifts scipy's exact
    two-sided Wilcoxon signed-rank test of the paired differences does not reject."""
    rng = np.random.default_rng(n)
    b = rng.normal(10, 1, n)
    c = b - 0.3 + rng.normal(0, 0.2, n)
    iv = intervals.difference_interval(b, c, 0.90, [([x], [y]) for x, y in zip(b, c)])
    assert iv.method == "signed-rank exact" and iv.coverage >= 0.90
    alpha, d = 1 - iv.coverage, c - b
    walsh = np.sort([(d[i] + d[j]) / 2 for i in range(n) for j in range(i, n)])
    for delta in walsh:
        for eps, inside in ((-1e-7, iv.lower < delta - 1e-7 <= iv.upper), (1e-7, iv.lower <= delta + 1e-7 < iv.upper)):
            p = stats.wilcoxon(d - (delta + eps), alternative="two-sided", method="exact").pvalue
            assert (p > alpha + 1e-9) == inside, (delta + eps, p, iv)


def duet_runs(tmp_path, name, values, pairs, share_cpu=False, end_wait=True, cpus=None):
    """Raw runs of one side in duet pairs; ``share_cpu``: in turns on one CPU, the entry's turns
    record written as the protocol wrote it (``end_wait``: as now; without: the first protocol);
    ``cpus``: (CPUs the run had, CPUs the profile asks for), as the harness records them."""
    paths = []
    for k, (thr, pair) in enumerate(zip(values, pairs)):
        result = E.case_result(CASE, env_step=E.active_for_throughput(thr) - 1.0)
        if share_cpu:
            result["turns"] = {"role": k % 2, "turn_ms": 25.0, "partner_met": True, "handovers": 9, "waited_s": 0.1,
                               **({"waited_partner_end_s": 0.05} if end_wait else {})}
        doc = E.doc([result])
        p = E.write(tmp_path / f"{name}_{k}.json", doc)
        duet = {"pair": pair, **({"cpu": 0, "share_cpu": True} if share_cpu else {})}
        env = {"environment": {"cpus": {"count": cpus[0], "profile_asks": cpus[1]}}} if cpus else {}
        (tmp_path / f"{name}_{k}.meta.json").write_text(json.dumps({"batch": "B", "duet": duet, **env}))
        paths.append(p)
    return paths


@pytest.fixture
def small_turn_bias(tmp_path, monkeypatch):
    """A turn bias of 0 with a 0.5% standard error for every class (the shipped corrections are
    measurements of one host; these tests are about other rules of runs in turns)."""
    path = tmp_path / "corrections.toml"
    path.write_text('[[correction]]\nprofile = "any"\ncpu = "any"\ncpus = 1\nbaseline = "b"\ncandidate = "c"\n'
                    'label = "c"\nbias = 0.0\nmean_se = 0.005\nse = 0.005\ndf = 12\nmeasured = "test"\n')
    monkeypatch.setattr(turn_bias, "CORRECTIONS_FILE", path)
    return 0.005


def test_runs_on_fewer_cpus_than_the_profile_say_so_and_other_cpu_counts_are_never_compared(tmp_path, small_turn_bias):
    host = [1.0, 0.8, 1.1, 0.9, 1.05, 0.85, 1.0, 0.95]
    base = [1000 * h for h in host]
    cand = [950 * h for h in host]
    pairs = [f"B/r{k + 1}p1" for k in range(len(host))]
    full_b = load.load_raw_side("fb", duet_runs(tmp_path, "fb", base, pairs, share_cpu=True, cpus=(2, 2)))
    full_c = load.load_raw_side("fc", duet_runs(tmp_path, "fc", cand, pairs, share_cpu=True, cpus=(2, 2)))
    g = analysis.build(full_b, full_c, threshold=0.90, min_runs=3).gate.iloc[0]
    assert g.gate == "PASS" and "smaller program" not in g.note
    # one CPU a run where the profile asks for two: the verdict says what program it is on
    one_b = load.load_raw_side("ob", duet_runs(tmp_path, "ob", base, pairs, share_cpu=True, cpus=(1, 2)))
    one_c = load.load_raw_side("oc", duet_runs(tmp_path, "oc", cand, pairs, share_cpu=True, cpus=(1, 2)))
    g1 = analysis.build(one_b, one_c, threshold=0.90, min_runs=3).gate.iloc[0]
    assert g1.gate == "PASS" and "measured on 1 CPU a run" in g1.note and "the profile asks for 2" in g1.note
    # a side on 2 CPUs against one on 1: two programs, split as two hardwares, never one comparison
    assert comparable.group_id(full_b.run_hardware[full_b.runs()[0]]) != comparable.group_id(
        one_c.run_hardware[one_c.runs()[0]])
    assert load.hardware_differences(full_b, one_c) == ["run_cpus (2 vs 1)"]


def test_gate_decides_on_duet_pairs_and_shows_the_unpaired_view(tmp_path):
    """The host's speed moves by round (x0.8 to x1.25) and hits both sides of a pair alike; the
    candidate is 5% slower in every pair. Paired, the gate sees the 5%; unpaired, the rounds'
    spread swamps it."""
    host = [1.0, 0.8, 1.25, 0.9, 1.1, 0.85, 1.2, 0.95]
    base = [1000 * h * (1 + 0.004 * (-1) ** k) for k, h in enumerate(host)]
    cand = [950 * h * (1 - 0.003 * (-1) ** k) for k, h in enumerate(host)]
    pairs = [f"B/r{k + 1}p1" for k in range(len(host))]
    b = load.load_raw_side("b", duet_runs(tmp_path, "b", base, pairs))
    c = load.load_raw_side("c", duet_runs(tmp_path, "c", cand, pairs))
    g = analysis.build(b, c, threshold=0.90, min_runs=3).gate.iloc[0]
    assert "paired over 8 pairs" in g.note and "unpaired view" in g.note and "in turns" not in g.note
    assert g.gate == "PASS" and 0.93 < g.lower <= g.estimate <= g.upper < 0.97
    # the same pairs in turns on one CPU: these runs name no profile nor CPU count, so no bias is
    # corrected and the error of the largest correction on record is added in quadrature (said in the
    # note): the estimate stays, both ends move out, by less than that error's whole 90% half-width
    # on each side; runs of the first protocol (a side went on inside its partner's timed steps)
    # decide nothing
    bt = load.load_raw_side("bt", duet_runs(tmp_path, "bt", base, pairs, share_cpu=True))
    ct = load.load_raw_side("ct", duet_runs(tmp_path, "ct", cand, pairs, share_cpu=True))
    rep = analysis.build(bt, ct, threshold=0.90, min_runs=3)
    gt = rep.gate.iloc[0]
    worst = max(turn_bias.corrections(), key=lambda c: c.bias ** 2 + c.se ** 2)
    err = math.hypot(worst.bias, worst.se)
    assert gt.turn_bias == 0 and gt.turn_bias_se == pytest.approx(err) and gt.estimate == pytest.approx(g.estimate)
    assert gt.turn_bias_source == "none"
    assert gt.lower < g.lower and gt.upper > g.upper and gt.coverage == 0.90
    quantile = stats.t.ppf(0.95, worst.df)
    assert math.log(g.lower / gt.lower) < quantile * err and math.log(gt.upper / g.upper) < quantile * err
    assert "(each pair's two sides in turns on one slot)" in gt.note and "its error added in quadrature" in gt.note
    assert "no turn bias studied for this candidate" in gt.note and "before a side waited" not in " ".join(rep.notes)
    bo = load.load_raw_side("bo", duet_runs(tmp_path, "bo", base, pairs, share_cpu=True, end_wait=False))
    old = analysis.build(bo, ct, threshold=0.90, min_runs=3)
    assert old.gate.iloc[0].gate == "MISSING"
    assert any("bo: 8 run(s) left out of every verdict: they took turns before a side waited" in n for n in old.notes)
    assert math.log(g.unpaired["upper"] / g.unpaired["lower"]) > 4 * math.log(g.upper / g.lower)
    # the same runs with their pairs broken up across rounds give the unpaired view only
    shuffled = load.load_raw_side("c2", duet_runs(tmp_path, "c2", cand, pairs[1:] + pairs[:1]))
    g2 = analysis.build(b, shuffled, threshold=0.90, min_runs=3).gate.iloc[0]
    assert g2.gate == "INCONCLUSIVE"
    # four pairs (a round-robin's few meetings) get no strata of their own: with 1-v-1 strata that
    # few, no 90% interval is narrower than the pairs' range; their runs stay in the batch's
    few = [f"B/r{k + 1}p1" if k < comparable.MIN_PAIRS - 1 else f"B/r{k + 1}p{9 + k}" for k in range(len(host))]
    b4 = load.load_raw_side("b4", duet_runs(tmp_path, "b4", base, pairs))
    c4 = load.load_raw_side("c4", duet_runs(tmp_path, "c4", cand, few))
    assert comparable.block_runs(b4, c4, b4.runs(), c4.runs()) == [(b4.runs(), c4.runs())]
    five = few[:comparable.MIN_PAIRS - 1] + pairs[comparable.MIN_PAIRS - 1:comparable.MIN_PAIRS] + few[comparable.MIN_PAIRS:]
    c5 = load.load_raw_side("c5", duet_runs(tmp_path, "c5", cand, five))
    assert len(comparable.block_runs(b4, c5, b4.runs(), c5.runs())) == comparable.MIN_PAIRS + 1  # 5 pairs + the batch


# --- hardware ------------------------------------------------------------------------------------

def test_runs_on_two_cpus_are_never_pooled(tmp_path, monkeypatch, capsys):
    """Pooled, each side's median would pass; on each CPU alone the candidate fails."""
    monkeypatch.chdir(tmp_path)
    intel = {"cpu": "Intel Xeon", "logical_cpus": "2", "gpu": "none", "node": "vm"}
    amd = {"cpu": "AMD EPYC", "logical_cpus": "2", "gpu": "none", "node": "vm"}
    b = (batch_runs(tmp_path, "bi", {"x": [1000, 1010, 990]}, intel)
         + batch_runs(tmp_path, "ba", {"x": [700, 705, 695, 702]}, amd))
    c = (batch_runs(tmp_path, "ci", {"x": [850, 860, 855, 852]}, intel)
         + batch_runs(tmp_path, "ca", {"x": [600, 605, 598]}, amd))
    # pooled, the ratio of the medians (850 / 702) would clear the gate by far
    assert np.median([850, 860, 855, 852, 600, 605, 598]) / np.median([1000, 1010, 990, 700, 705, 695, 702]) > 1.2
    code = cli.main(["report", "--out", "out", "--baseline-raw", *b, "--candidate-raw", *c])
    out = capsys.readouterr().out
    assert code == 1
    top = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert top["verdict"] == "FAIL" and len(top["hardware"]) == 2
    assert {h["verdict"] for h in top["hardware"]} == {"FAIL"}
    for h in top["hardware"]:
        s = json.loads((tmp_path / "out" / h["summary"]).read_text())
        assert s["cases"][0]["gate"] == "FAIL"
        runs = s["cases"][0]["throughput"]
        assert runs["baseline"]["runs"] + runs["candidate"]["runs"] == 7
        assert any("left out" in n for n in s["notes"])
    assert "VERDICT PER HARDWARE (never pooled)" in out


def test_no_hardware_with_enough_runs_is_misaligned_naming_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    intel = {"cpu": "Intel Xeon", "logical_cpus": "2", "gpu": "none", "node": "vm"}
    amd = {"cpu": "AMD EPYC", "logical_cpus": "2", "gpu": "none", "node": "vm"}
    b = batch_runs(tmp_path, "bi", {"x": [1000, 1010, 990]}, intel) + batch_runs(tmp_path, "ba", {"x": [700]}, amd)
    c = batch_runs(tmp_path, "ca", {"x": [950, 960, 955]}, amd) + batch_runs(tmp_path, "ci", {"x": [990]}, intel)
    assert cli.main(["report", "--out", "out", "--baseline-raw", *b, "--candidate-raw", *c, "--quiet"]) == 1
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["verdict"] == "INCOMPLETE" and s["cases"][0]["gate"] == "MISALIGNED"
    assert "Intel Xeon" in s["cases"][0]["gate_detail"]["note"] and "AMD EPYC" in s["cases"][0]["gate_detail"]["note"]
    assert any("no hardware has >= 3 runs" in n for n in s["notes"])


# --- ledger, shares, additivity -----------------------------------------------------------------

BASE = dict(env_step=9.0, physics=6.0, step_core=6.5, update_state=1.5, reset_done=0.5, replay=0.6, bookkeeping=0.4)


def phase_side(tmp_path, name, per_run):
    paths = [E.write(tmp_path / f"{name}_run{k}.json", E.doc([E.case_result(CASE, **p)])) for k, p in enumerate(per_run)]
    return load.load_raw_side(name, paths)


def noisy(rng, n, sd, **kw):
    """n runs of BASE with kw applied and independent noise on physics (env_step and
    step_core move with it, so the parts add up)."""
    out = []
    for _ in range(n):
        p = {**BASE, **kw}
        e = float(rng.normal(0, sd))
        out.append({**p, "physics": p["physics"] + e, "step_core": p["step_core"] + e, "env_step": p["env_step"] + e})
    return out


def test_ledger_changes_have_intervals_and_noise_is_marked(tmp_path):
    rng = np.random.default_rng(1)
    dev = phase_side(tmp_path, "dev", noisy(rng, 6, 0.05))
    # update_state 1 ms faster; physics only noise
    opt = phase_side(tmp_path, "opt", noisy(rng, 6, 0.05, update_state=0.5, env_step=8.0))
    led, marks = ledger.ledger_table(dev, [opt], [CASE], 0.90)
    row = led.iloc[0]
    pd_ = tables.attribution_parts(dev, CASE)
    po = tables.attribution_parts(opt, CASE)
    iv = intervals.difference_interval(pd_["physics"], po["physics"], 0.90)
    assert (row.physics_lower_ms, row.physics_upper_ms) == (pytest.approx(iv.lower), pytest.approx(iv.upper))
    # brute force over pairs: the k-th smallest and largest of the 36 differences
    diffs = np.sort((po["physics"].to_numpy()[None, :] - pd_["physics"].to_numpy()[:, None]).ravel())
    assert row.physics_lower_ms == pytest.approx(diffs[iv.k - 1]) and row.physics_upper_ms == pytest.approx(diffs[-iv.k])
    # the family: five columns of one case, each with Welch's p (scipy), selected by Benjamini-Hochberg
    assert marks.size == 5
    assert row.update_state_p == pytest.approx(stats.ttest_ind(pd_["update_state"], po["update_state"],
                                                               equal_var=False).pvalue)
    assert row.update_state_clear and row.update_state_upper_ms < 0
    assert not row.physics_clear and row.physics_lower_ms < 0 < row.physics_upper_ms
    a = tables.attribution_table(dev, opt, [CASE], 0.90)[0].iloc[0]
    assert a.update_state_share_lower <= a.update_state_share <= a.update_state_share_upper
    assert 0.5 < a.update_state_share_lower and a.update_state_share_upper < 1.5


@pytest.mark.parametrize("combined_update_state, noise, expected", [
    (0.5, 0.01, "adds up"),          # -1 and -1 give -2: interaction 0, tight
    (1.4, 0.01, "does not add up"),  # the combination keeps most of update_state's cost
    (0.5, 0.6, "undetermined"),      # adds up on average, but the noise is as large as the effects
])
def test_additivity_has_three_answers(tmp_path, combined_update_state, noise, expected):
    rng = np.random.default_rng(5)
    n = 5
    dev = phase_side(tmp_path, "dev", noisy(rng, n, noise))
    a = phase_side(tmp_path, "a", noisy(rng, n, noise, physics=5.0, step_core=5.5, env_step=8.0))
    b = phase_side(tmp_path, "b", noisy(rng, n, noise, update_state=0.5, env_step=8.0))
    both = phase_side(tmp_path, "both", noisy(rng, n, noise, physics=5.0, step_core=5.5,
                                              update_state=combined_update_state,
                                              env_step=5.5 + combined_update_state + 0.5 + 0.5))
    add = ledger.additivity_table(dev, {"a": a, "b": b, "both": both}, {"both": ["a", "b"]}, [CASE], 0.90).iloc[0]
    assert add.additivity == expected, add.to_dict()
    assert add.method.startswith("stratified percentile bootstrap")
    assert add.interaction_lower_ms <= add.interaction_ms <= add.interaction_upper_ms
    # the margin is set before the data: 5% of the reference's median active time
    assert add.margin_ms == pytest.approx(0.05 * float(tables.attribution_parts(dev, CASE)["active"].median()))
    # the point is the resamples' median, near the measured change minus the sum of the single changes
    width = add.interaction_upper_ms - add.interaction_lower_ms
    assert abs(add.interaction_ms - (add.measured_ms - add.sum_of_parts_ms)) <= 0.25 * width + 1e-3
    if expected == "undetermined":
        assert add.runs_needed > n
    # an independent bootstrap of the same statistic (scipy's, over each side's runs)
    sides = [dev, both, a, b]
    parts = [tables.attribution_parts(s, CASE)[list(ledger.PHASES)].to_numpy() for s in sides]

    def stat(*idx, axis=-1):
        sums = [np.nansum(np.median(p[i.astype(int)], axis=-2), axis=-1) for p, i in zip(parts, idx)]
        return sums[1] - sums[2] - sums[3] + sums[0]

    res = stats.bootstrap([np.arange(len(p)) for p in parts], stat, n_resamples=4000, confidence_level=0.90,
                          method="percentile", vectorized=True, random_state=11)
    lo, hi = res.confidence_interval
    spread = max(hi - lo, 1e-6)
    assert abs(lo - add.interaction_lower_ms) < 0.35 * spread + 0.002
    assert abs(hi - add.interaction_upper_ms) < 0.35 * spread + 0.002


def test_a_side_never_gates_from_a_tolerance_wider_than_its_effect(tmp_path):
    """The old check said "adds up" whenever the difference was within the run-to-run range;
    with runs this noisy against a 0.2 ms effect, the test must say it cannot tell."""
    rng = np.random.default_rng(9)
    dev = phase_side(tmp_path, "dev", noisy(rng, 3, 1.0))
    a = phase_side(tmp_path, "a", noisy(rng, 3, 1.0, update_state=1.4, env_step=8.9))
    both = phase_side(tmp_path, "both", noisy(rng, 3, 1.0, update_state=1.4, env_step=8.9))
    led, _ = ledger.ledger_table(dev, [a, both], [CASE], 0.90)
    add = ledger.additivity_table(dev, {"a": a, "both": both}, {"both": ["a"]}, [CASE], 0.90).iloc[0]
    assert add.additivity == "undetermined"


def test_report_restricted_to_named_batches(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    b = batch_runs(tmp_path, "b", {"A": [1000, 1010, 995], "B": [1300, 1312, 1290]})
    c = batch_runs(tmp_path, "c", {"A": [700, 705, 702], "B": [1248, 1260, 1240]})
    assert cli.main(["report", "--out", "all", "--baseline-raw", *b, "--candidate-raw", *c, "--quiet"]) == 1
    assert json.loads((tmp_path / "all" / "summary.json").read_text())["cases"][0]["gate_detail"]["strata"] == 2
    assert cli.main(["report", "--out", "b", "--baseline-raw", *b, "--candidate-raw", *c, "--batch", "B", "--quiet"]) == 0
    s = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert s["cases"][0]["throughput"]["baseline"]["runs"] == 3 and s["cases"][0]["gate"] == "PASS"
    capsys.readouterr()
    assert cli.main(["report", "--out", "x", "--baseline-raw", *b, "--candidate-raw", *c, "--batch", "Z"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--batch 'Z'" in err[0] and "valid: A, B" in err[0] and not (tmp_path / "x").exists()


@pytest.mark.parametrize("seed", range(5))
def test_family_marks_are_benjamini_hochberg(seed):
    """Against scipy's adjusted p-values (an independent computation): a change is selected exactly
    when its Benjamini-Hochberg adjusted p is at most the false discovery rate; the bound under any
    dependence is Benjamini-Yekutieli's q (1 + 1/2 + ... + 1/m)."""
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(0, 1, 30), rng.uniform(0, 0.01, 8)])
    marks = intervals.family_marks(list(p), 0.90)
    adjusted = stats.false_discovery_control(p, method="bh")
    assert marks.selected == [bool(a <= 0.10 + 1e-12) for a in adjusted]
    assert marks.size == 38 and marks.chance_marks == pytest.approx(3.8)
    assert marks.any_dependence == pytest.approx(0.10 * sum(1 / i for i in range(1, 39)))


@pytest.mark.parametrize("seed", range(3))
def test_change_p_in_one_batch_is_welch_and_in_pairs_is_the_paired_t(seed):
    """One batch: scipy's Welch t. Batches of one run a side: scipy's paired t on the same runs
    (the level per batch is the pairing)."""
    rng = np.random.default_rng(seed)
    b, c = rng.normal(10, 1, 5), rng.normal(10.8, 1.5, 7)
    assert intervals.change_p([(b, c)]) == pytest.approx(stats.ttest_ind(b, c, equal_var=False).pvalue)
    b, c = rng.normal(10, 1, 9), rng.normal(10.5, 1, 9)
    assert intervals.change_p([([x], [y]) for x, y in zip(b, c)]) == pytest.approx(stats.ttest_rel(b, c).pvalue)


def test_change_p_over_batches_is_the_two_way_least_squares_t_and_ignores_batch_shifts():
    """Several runs per batch: the shift's t from the normal equations solved by hand (sums per
    batch, not a matrix solver), and a host shift added to one batch changes nothing."""
    b1, c1 = np.array([10.0, 10.4, 9.8]), np.array([10.9, 11.3, 11.0, 10.7])
    b2, c2 = np.array([12.1, 11.7]), np.array([12.6, 13.1, 12.9])
    blocks = [(b1, c1), (b2, c2)]
    # the shift's least-squares estimate with a level per batch: the within-batch weighted mean difference
    w = [len(b) * len(c) / (len(b) + len(c)) for b, c in blocks]
    shift = sum(wi * (c.mean() - b.mean()) for wi, (b, c) in zip(w, blocks)) / sum(w)
    resid = np.concatenate([np.concatenate([b - lvl, c - lvl - shift]) for (b, c), lvl in zip(blocks, [
        (b.sum() + c.sum() - len(c) * shift) / (len(b) + len(c)) for b, c in blocks])])
    df = sum(len(b) + len(c) for b, c in blocks) - 3
    se = math.sqrt(resid @ resid / df / sum(w))
    expected = 2 * stats.t.sf(abs(shift) / se, df)
    assert intervals.change_p(blocks) == pytest.approx(expected)
    assert intervals.change_p([(b1, c1), (b2 + 7.0, c2 + 7.0)]) == pytest.approx(expected)


def test_the_error_split_over_planned_looks_is_bonferroni():
    """until-decisive and find split one error the same way: every look at 1 - (1 - c) / looks."""
    assert rules.split_confidence(0.90, 1) == pytest.approx(0.90)
    assert rules.split_confidence(0.90, 12) == pytest.approx(1 - 0.10 / 12)
    # find over 3 commits: ceil(log2 3) = 2 steps, the total and the answer: 4 decisions x 3 looks
    assert find.decision_confidence(0.90, 3, 3) == pytest.approx(1 - 0.10 / 12)
    assert find.decision_confidence(0.90, 1, 2) == pytest.approx(1 - 0.10 / 4)


def test_looks_too_small_for_an_interval_spend_no_error():
    """Pairs at looks of 5..12 at a nominal 90%: 5 pairs have no signed-rank interval above 0.9375
    (widest coverage 1 - 2 / 2^n), below the levels the spending plan gives, so that look decides
    nothing and spends nothing: the levels are those of the plan over the 6..12 looks alone, and each
    of those looks can give an interval at its level (6 pairs reach 0.969). With every look able to
    decide, the plan over all 8."""
    sizes = list(range(5, 13))
    deciding = rules.deciding_looks(0.90, sizes, lambda n, c: intervals.has_interval(n, c, True))
    assert sorted(deciding) == [1, 2, 3, 4, 5, 6, 7]
    assert list(deciding.values()) == pytest.approx(rules.look_levels(0.90, sizes[1:]))
    assert not intervals.has_interval(5, min(deciding.values()), True)
    assert all(intervals.has_interval(sizes[i], level, True) for i, level in deciding.items())
    every = rules.deciding_looks(0.90, sizes, lambda n, c: True)
    assert list(every.values()) == pytest.approx(rules.look_levels(0.90, sizes))
    # no look can decide: nothing is spent
    assert rules.deciding_looks(0.90, [1, 2], lambda n, c: intervals.has_interval(n, c, True)) == {}
    # the signed-rank count: 5 pairs reach 90% (1 - 2/32), not 98%; 7 do (1 - 2/128)
    assert intervals.has_interval(5, 0.90, True) and not intervals.has_interval(5, 0.98, True)
    assert intervals.has_interval(7, 0.98, True) and not intervals.has_interval(6, 0.98, True)
    assert intervals.has_interval(5, 0.90, False) and not intervals.has_interval(2, 0.90, False)


def test_a_batchs_looks_count_the_runs_it_pools_and_a_fitted_design_counts_every_look():
    until = until_decisive.plan({"gate": {}}, 5, 12, 30)
    assert until["planned_looks"] == 8 and until["levels"] == pytest.approx(rules.look_levels(0.90, list(range(5, 13))))
    settled = until_decisive.settle_looks(until, True, False, 0)
    assert settled["counted_looks"] == 7 and settled["levels"][0] is None
    # 4 earlier pairs: every look has 9+ pairs, each can decide
    pooled = until_decisive.settle_looks(until, True, False, 4)
    assert pooled["counted_looks"] == 8 and pooled["levels"] == pytest.approx(rules.look_levels(0.90, list(range(9, 17))))
    assert until_decisive.settle_looks(until, True, True, 0)["counted_looks"] == 8
    assert until_decisive.settle_looks(until, False, False, 3)["counted_looks"] == 8
    line = until_decisive.plan_line(settled)
    assert "5 runs a side: none (too few)" in line and "Pocock-type" in line
    assert f"12 runs a side at {settled['levels'][-1]:.4f}" in line


def brute_mw_p_less(c, b):
    """One-sided exact Mann-Whitney by enumeration: P(U <= u observed) over every split of the
    pooled runs (no ties), U counting candidate-over-baseline pairs."""
    pooled = np.concatenate([c, b])
    u_obs = sum((x > y) for x in c for y in b)
    count = total = 0
    for idx in itertools.combinations(range(len(pooled)), len(c)):
        cc = pooled[list(idx)]
        bb = np.delete(pooled, list(idx))
        total += 1
        count += sum((x > y) for x in cc for y in bb) <= u_obs
    return count / total


def test_the_rank_test_is_the_exact_mann_whitney_from_five_runs():
    rng = np.random.default_rng(3)
    b, c = rng.normal(100, 4, 5), rng.normal(93, 4, 6)
    assert rules.rank_test_p(b, c, 0.95) == pytest.approx(brute_mw_p_less(c, 0.95 * b))
    assert rules.rank_test_p(b[:4], c, 0.95) is None  # below five runs a side: no p-value


def test_the_equivalence_test_has_three_answers():
    # inside +-margin: adds up; wholly beyond: does not; straddling: undetermined, with the runs
    # at which an interval this wide (shrinking as 1/sqrt(runs)) would fit the nearer decision
    assert rules.decide_equivalence(0.1, -0.2, 0.3, 0.5, 4) == ("adds up", None)
    assert rules.decide_equivalence(1.0, 0.7, 1.3, 0.5, 4) == ("does not add up", None)
    # half width 0.5, 0.25 from the margin: 4 runs x (0.5 / 0.25)^2 (values exact in binary)
    assert rules.decide_equivalence(0.75, 0.25, 1.25, 1.0, 4) == ("undetermined", 16)
    assert rules.decide_equivalence(0.0, None, None, 0.5, 4) == ("undetermined", None)


def test_the_dispersion_rules():
    x = np.array([98.0, 100.0, 103.0, 101.0])
    med, rng_pct, cv = rules.spread(x)
    assert med == 100.5 and rng_pct == pytest.approx(5 / 100.5)
    assert cv == pytest.approx(np.sqrt(np.mean((x - x.mean()) ** 2)) / x.mean())
    assert rules.is_wide(rng_pct, 0.04) and not rules.is_wide(rng_pct, 0.05) and not rules.is_wide(None, 0.05)
    assert rules.is_transient(1.06) and rules.is_transient(0.94) and not rules.is_transient(1.04)
    # DRIFT: [min, max] apart and the medians further apart than the wider batch's range
    assert rules.drifts({"a": [100, 101, 102], "b": [110, 111, 112]})
    assert not rules.drifts({"a": [100, 101, 102], "b": [102.5, 103, 104]})  # 2.0 apart, range 2: no
    assert not rules.drifts({"a": [100, 105, 110], "b": [104, 106, 108]})  # overlapping


def test_variance_components_recover_known_levels():
    """Runs made of known levels (batch 4%, run 2%, window 1%, on the log scale): the method of
    moments gives them back; the optimal windows per run follow Kalibera and Jones's formula."""
    rng = np.random.default_rng(11)
    runs, drawn = [], {"batch": [], "run": [], "window": []}
    for batch in range(30):
        b = rng.normal(0, 0.04)
        drawn["batch"].append(b)
        for _ in range(6):
            r = rng.normal(0, 0.02)
            windows = rng.normal(0, 0.01, 10)
            drawn["run"].append(r)
            drawn["window"] += list(windows)
            # 10 steps a window, equal within it: a window's mean is its level exactly
            runs.append((f"B{batch}", np.repeat(np.exp(1.0 + b + r + windows), 10)))
    c = components.estimate(runs, k=10)
    assert (c.runs, c.batches, c.windows_per_run) == (180, 30, 10)
    # against the spread of the effects actually drawn (30 batch effects are a small sample of 4%)
    assert c.window == pytest.approx(np.std(drawn["window"], ddof=1), rel=0.05)
    assert c.run == pytest.approx(np.std(drawn["run"], ddof=1), rel=0.1)
    assert c.batch == pytest.approx(np.std(drawn["batch"], ddof=1), rel=0.15)
    # windows per run: sqrt(run cost x window var / (window cost x run var)) = sqrt(20 x 1 / (0.5 x 4)) ~ 3.2
    fixed = components.Components(window=0.01, run=0.02, batch=None, windows_per_run=10, runs=6, batches=1)
    assert components.best_windows(fixed, run_cost_s=20.0, window_cost_s=0.5) == 3
    # runs a side for +-3% at z 1.645: 2 x (0.02^2 + 0.01^2 / 10) x (1.645 / 0.03)^2 = 2.5 -> 3
    assert components.runs_for(fixed, 10, 0.03) == 3


def test_the_within_run_spread_is_the_log_sd_of_ten_step_windows():
    """A run whose 10-step windows average 4, 5 and 6 ms: the spread inside it is the standard
    deviation of log(4), log(5), log(6); fewer than two windows give none."""
    steps = [4.0] * 10 + [5.0] * 10 + [6.0] * 10
    result = {"phase_ms_per_vector_step": {"env_step_ms": {"samples_ms": [x - 0.5 for x in steps]},
                                           "replay_ms": {"samples_ms": [0.3] * 30},
                                           "bookkeeping_ms": {"samples_ms": [0.2] * 30}}}
    assert load.window_spread(result) == pytest.approx(np.std(np.log([4.0, 5.0, 6.0]), ddof=1))
    short = {"phase_ms_per_vector_step": {k: {"samples_ms": v["samples_ms"][:15]}
                                          for k, v in result["phase_ms_per_vector_step"].items()}}
    assert load.window_spread(short) is None


def round_robin(sides: list[str], rounds: int) -> list[list[tuple[str, str]]]:
    """The duet schedule the runner uses for ``pairing = "round-robin"``, as label pairs a round."""
    docs = [{"label": s, "sha": s, "role": "baseline" if k == 0 else "candidate"} for k, s in enumerate(sides)]
    return [[(x["label"], y["label"]) for x, y in design.pairs_of_round(docs, None, "round-robin", k)] for k in range(rounds)]


def test_round_robin_sides_are_compared_through_every_pair_as_blocks(tmp_path, small_turn_bias):
    """Four sides in round-robin duets, each pair's slot slowed or sped by the host (x0.7 to x1.3, both
    runs alike); two sides meet in only two of six rounds. Through every pair as blocks the gate
    sees each candidate's own speed; the unpaired view of the same runs cannot tell."""
    truth = {"base": 1000.0, "c95": 950.0, "c85": 850.0, "c100": 1000.0}
    rng = np.random.default_rng(7)
    values: dict[str, list[tuple[float, str]]] = {s: [] for s in truth}
    for r, pairs in enumerate(round_robin(list(truth), 6)):
        for p, (x, y) in enumerate(pairs):
            slot = rng.uniform(0.7, 1.3)
            for s in (x, y):
                values[s].append((truth[s] * slot * math.exp(rng.normal(0, 0.01)), f"B/r{r + 1}p{p + 1}"))
    sides = {s: load.load_raw_side(s, duet_runs(tmp_path, s, [v for v, _ in vs], [p for _, p in vs]))
             for s, vs in values.items()}
    assert len(comparable.direct_pairs(sides["base"], sides["c95"])) < comparable.MIN_PAIRS
    for name, want in (("c95", "PASS"), ("c85", "FAIL"), ("c100", "PASS")):
        g = analysis.build(sides["base"], sides[name], 0.90, 3, paired=comparable.PairedBatch(list(sides.values()))).gate.iloc[0]
        ratio = truth[name] / truth["base"]
        assert g.gate == want and abs(g.estimate / ratio - 1) < 0.02 and g.method.startswith("intra-block"), (name, g.to_dict())
        assert "pairs of every side" in g.note and "unpaired view" in g.note and "in turns" not in g.note
        assert math.log(g.unpaired["upper"] / g.unpaired["lower"]) > 3 * math.log(g.upper / g.lower)
    # the same pairs in turns on one CPU: through the fit, widened by the turn-bias bound; under the
    # first protocol the runs decide nothing
    for end_wait, gate in ((True, "FAIL"), (False, "MISSING")):
        turns = {s: load.load_raw_side(s, duet_runs(tmp_path, f"{s}-t{end_wait}", [v for v, _ in vs],
                                                    [p for _, p in vs], True, end_wait=end_wait))
                 for s, vs in values.items()}
        g = analysis.build(turns["base"], turns["c85"], 0.90, 3, paired=comparable.PairedBatch(list(turns.values()))).gate.iloc[0]
        assert g.gate == gate and (g.method or "").startswith("intra-block") == end_wait, g.to_dict()
    # a flagged run: the verdict without it is refitted through the pairs too (not the unpaired view)
    flagged = sides["c95"]
    flagged.run_flags = {flagged.runs()[0]: ["machine busy during the run"]}
    g = analysis.build(sides["base"], flagged, 0.90, 3, paired=comparable.PairedBatch(list(sides.values()))).gate.iloc[0]
    assert g.gate == "PASS" and g.without_flagged == "PASS" and g.flagged_runs == 1
    # without the other sides (or for sides whose runs did not all run in pairs) the rank intervals decide
    g = analysis.build(sides["base"], sides["c95"], 0.90, 3).gate.iloc[0]
    assert not g.method.startswith("intra-block")


def test_the_intra_block_interval_covers_as_stated_in_round_robin_aa_batches():
    """A/A: six sides of the same speed, five round-robin rounds, each slot's speed drawn anew and
    CPU 1 3% faster than CPU 0 (the CPUs swap sides every round); the 90% interval of a candidate
    against the baseline excludes 1 in at most about one batch of ten (a side's own variance,
    where above the pool's, makes it somewhat wider than the pooled fit's), and below (a false
    slower) in at most about one of twenty."""
    sides = [f"s{k}" for k in range(6)]
    schedule = round_robin(sides, 5)
    rng = np.random.default_rng(11)
    outside = below = 0
    trials = 300
    for _ in range(trials):
        rows = []
        for r, pairs in enumerate(schedule):
            for p, (x, y) in enumerate(pairs):
                slot = rng.normal(0, 0.2)
                cpus = (0, 1) if r % 2 else (1, 0)
                rows += [(s, f"r{r}p{p}", 5000 * math.exp(slot + 0.03 * cpu + rng.normal(0, 0.03)), cpu)
                         for s, cpu in zip((x, y), cpus)]
        c = blocks.contrast(blocks.fit(rows), "s0", "s3", 0.90)
        outside += not (c.lower <= 1 <= c.upper)
        below += c.upper < 1
    assert outside / trials <= 0.14 and below / trials <= 0.08, (outside, below)


def round_robin_phase_sides(tmp_path, phases: dict[str, dict], rounds: int, seed: int, noise: float,
                            cases: tuple[str, ...] = (CASE,)) -> dict:
    """Raw runs of sides in round-robin duets (the runner's schedule), each slot's pace x0.7 to x1.3 on
    every phase of both its runs and ``noise`` (log) of a run's own; loaded as sides."""
    rng = np.random.default_rng(seed)
    paths: dict[str, list[str]] = {s: [] for s in phases}
    for r, pairs in enumerate(round_robin(list(phases), rounds)):
        for p, (x, y) in enumerate(pairs):
            slot = rng.uniform(0.7, 1.3)
            for s in (x, y):
                pace = slot * math.exp(rng.normal(0, noise))
                doc = E.doc([E.case_result(case, **{k: v * pace for k, v in phases[s].items()}) for case in cases])
                stem = tmp_path / f"{s}_{r}_{p}"
                paths[s].append(E.write(Path(f"{stem}.json"), doc))
                Path(f"{stem}.meta.json").write_text(json.dumps({"batch": "B", "duet": {"pair": f"B/r{r + 1}p{p + 1}"}}))
    return {s: load.load_raw_side(s, paths[s]) for s in phases}


def test_the_ledger_of_round_robin_sides_reads_each_phase_through_every_pair(tmp_path):
    """Four sides in round-robin duets, each slot's pace x0.7 to x1.3 on every phase of both runs;
    the optimization takes 1 ms off physics (6 -> 5 ms at full pace) and nothing else. Through the
    pairs the ledger marks that physics change, near -1 ms, and no change of update_state; the
    rank view of the same runs, which meet only twice, cannot separate it from the slots."""
    phases = {"base": BASE, "dev": BASE,
              "opt": {**BASE, "physics": 5.0, "step_core": 5.5, "env_step": 8.0}, "other": BASE}
    sides = round_robin_phase_sides(tmp_path, phases, rounds=6, seed=3, noise=0.01)
    fits = ledger.part_fits(list(sides.values()))
    table, _ = ledger.ledger_table(sides["dev"], [sides["opt"], sides["other"]], [CASE], 0.90, fits=fits)
    opt = table[table.candidate == "opt"].iloc[0]
    assert opt.method.startswith("through every side's pairs")
    # in ms at the reference's median pace (its runs' median slot, here about x1.1)
    assert opt.physics_clear and -1.4 < opt.physics_lower_ms < opt.physics_ms < opt.physics_upper_ms < -0.8, opt.to_dict()
    assert not opt.update_state_clear
    rank, _ = ledger.ledger_table(sides["dev"], [sides["opt"]], [CASE], 0.90)
    assert rank.iloc[0].method == "rank"
    assert rank.iloc[0].physics_upper_ms - rank.iloc[0].physics_lower_ms > 5 * (opt.physics_upper_ms - opt.physics_lower_ms)


def test_until_decisive_stops_when_no_open_case_is_within_the_plans_reach():
    """Rounds stop early when the measured spread says every open case needs more runs a side than
    --max-runs allows; a case with no interval yet has no spread to say so, and rounds go on."""
    assert until_decisive.beyond_reach([("dev", "a", 9), ("next", "b", 12)], 5)
    assert not until_decisive.beyond_reach([("dev", "a", 9), ("next", "b", 5)], 5)
    assert not until_decisive.beyond_reach([("dev", "a", 9), ("next", "b", None)], 5)
    # a case within the turn-bias bound of the threshold: no number of pairs in turns decides it
    assert until_decisive.beyond_reach([("dev", "a", math.inf), ("next", "b", 7)], 5)
    assert not until_decisive.beyond_reach([("dev", "a", math.inf), ("next", "b", 4)], 5)


def test_runs_needed_without_an_interval_counts_pairs_by_the_signed_rank_statistic():
    """Six pairs at 98% have no signed-rank interval (2 / 2^6 > 2%): the pairs it needs are 7, the first
    count whose smallest order statistic reaches 98%; the rank-sum count (6 runs a side) would say 6."""
    blocks = [(np.array([1000.0 + k]), np.array([950.0 + 2 * k])) for k in range(6)]
    iv = intervals._paired_shift(blocks, 0.98, log=True)
    assert iv.lower is None and iv.method.startswith("signed-rank")
    assert intervals.runs_needed(iv, 0.90, 0.98) == 7
    assert intervals._paired_shift([*blocks, (np.array([1007.0]), np.array([964.0]))], 0.98, log=True).lower
    unpaired = intervals.ratio_interval(np.array([1000.0, 1001.0]), np.array([950.0, 951.0]), 0.98)
    # rank-sum: 4 a side reach 1 - 2/70 = 0.971, 5 reach 1 - 2/252 = 0.992
    assert unpaired.lower is None and intervals.runs_needed(unpaired, 0.90, 0.98) == 5


def test_additivity_of_round_robin_sides_is_a_contrast_of_the_pairs_fit(tmp_path):
    """Four sides in round-robin duets, every slot's pace x0.7 to x1.3 on both runs: one optimization
    takes 1 ms off physics, another 0.5 ms off update_state, the combined side both. Through the
    pairs (the active time's intra-block fit) the interaction is the measured change minus the sum of
    the single ones exactly, its interval about 0 and narrow enough to say the gains add up; the
    bootstrap over runs of the same sides, blind to the slots, cannot tell."""
    phases = {"dev": BASE, "a": {**BASE, "physics": 5.0, "step_core": 5.5, "env_step": 8.0},
              "b": {**BASE, "update_state": 0.5, "env_step": 8.5},
              "both": {**BASE, "physics": 5.0, "step_core": 5.5, "update_state": 0.5, "env_step": 7.5}}
    sides = round_robin_phase_sides(tmp_path, phases, rounds=9, seed=4, noise=0.005)
    others = {k: v for k, v in sides.items() if k != "dev"}
    fits = ledger.part_fits(list(sides.values()))
    add = ledger.additivity_table(sides["dev"], others, {"both": ["a", "b"]}, [CASE], 0.90, fits=fits).iloc[0]
    assert add.method.startswith("intra-block fit"), add.to_dict()
    assert add.interaction_ms == pytest.approx(add.measured_ms - add.sum_of_parts_ms)
    assert add.interaction_lower_ms < 0 < add.interaction_upper_ms
    assert add.additivity == "adds up", add.to_dict()
    blind = ledger.additivity_table(sides["dev"], others, {"both": ["a", "b"]}, [CASE], 0.90).iloc[0]
    assert blind.method.startswith("stratified percentile bootstrap") and blind.additivity == "undetermined"


def test_additivity_pools_the_cases_in_a_row_of_its_own(tmp_path):
    """Three cases of the same four round-robin sides (each run's pace the same in its cases): a row per
    case against 5% of the reference's active time, then a pooled row of the cases' interactions as
    shares of it, from the cases' own intervals (recomputed here with intervals.pooled)."""
    phases = {"dev": BASE, "a": {**BASE, "physics": 5.0, "step_core": 5.5, "env_step": 8.0},
              "b": {**BASE, "update_state": 0.5, "env_step": 8.5},
              "both": {**BASE, "physics": 5.0, "step_core": 5.5, "update_state": 0.5, "env_step": 7.5}}
    cases = ("sac/g1_walk_flat/mujoco", "sac/g1_walk_flat/motrix", "flashsac/g1_walk_flat/mujoco")
    sides = round_robin_phase_sides(tmp_path, phases, rounds=9, seed=4, noise=0.005, cases=cases)
    others = {k: v for k, v in sides.items() if k != "dev"}
    table = ledger.additivity_table(sides["dev"], others, {"both": ["a", "b"]}, list(cases), 0.90,
                                    fits=ledger.part_fits(list(sides.values())))
    assert list(table.case) == [*cases, ledger.POOLED]
    per_case, pooled = table.iloc[:3], table.iloc[3]
    assert (per_case.margin_ms == 0.05 * per_case.active_ms_reference).all()
    q = stats.t.ppf(0.95, per_case["df"].to_numpy(dtype=float))
    ses = (per_case.interaction_upper_ms - per_case.interaction_lower_ms) / 2 / q / per_case.active_ms_reference
    again = intervals.pooled(list(per_case.interaction_ms / per_case.active_ms_reference), list(ses), 0.90)
    assert (pooled.interaction_share_lower, pooled.interaction_share_upper) == (pytest.approx(again.lower),
                                                                                 pytest.approx(again.upper))
    assert pooled.cases == 3 and pooled.margin_share == 0.05 and pooled.additivity == "adds up", pooled.to_dict()


def test_looks_are_counted_over_every_pooled_batch(tmp_path):
    """Two until-decisive batches of 2 planned looks each at a nominal 90%: the report decides at
    1 - 0.10 / 4 (each batch's own split, 95%, would spend the error twice); one batch alone at 95%."""
    records = []
    for name in ("B1", "B2"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"batch": name, "looks": 2, "until_decisive": {
            "planned_looks": 2, "confidence": 0.95, "nominal_confidence": 0.90}}))
        records.append(str(path))
    both = [SimpleNamespace(batches={"r1": "B1", "r2": "B2"})]
    confidence, notes = until_decisive.stopping(records, both, 0.90)
    assert confidence == pytest.approx(0.975) and "split over 4 look(s)" in notes[-1]
    one = [SimpleNamespace(batches={"r1": "B1"})]
    assert until_decisive.stopping(records, one, 0.90)[0] == pytest.approx(0.95)
    assert until_decisive.stopping(records, [SimpleNamespace(batches={})], 0.90) == (0.90, [])


def test_the_turn_bias_correction_applies_by_class_and_candidate(tmp_path):
    """A studied candidate of the runs' class gets its own correction; another candidate of a class with
    fewer than three studied gets none but the error of the class's largest (bias and se in quadrature);
    with three or more, the random-effects prediction across them; a class never studied, the largest
    for as many CPUs a run, else of all. An estimate within the correction's own error of the threshold
    leaves no number of runs that decides."""
    def entry(cpus, candidate, bias, se):
        return (f'[[correction]]\nprofile = "demo"\ncpu = "AMD EPYC"\ncpus = {cpus}\nbaseline = "b"\n'
                f'candidate = "{candidate}"\nlabel = "{candidate}"\nbias = {bias}\nmean_se = {se}\nse = {se}\n'
                'df = 5\nmeasured = "x"\n')
    data = tmp_path / "corrections.toml"
    data.write_text(entry(2, "next", -0.03, 0.01) + entry(2, "dev", 0.04, 0.015) + entry(1, "dev", 0.001, 0.004))
    known = turn_bias.corrections(data)
    own = turn_bias.applying("demo", "AMD EPYC", 2, "b", "next", known)
    assert (own.how, own.bias, own.se, own.df) == ("studied", -0.03, 0.01, 5)
    other = turn_bias.applying("demo", "AMD EPYC", 2, "b", "new", known)
    assert other.how == "none" and other.bias == 0 and other.se == pytest.approx(math.hypot(0.04, 0.015))
    assert "none corrected" in turn_bias.note(other, 0.9) and "this candidate's turn bias -3.0%" in turn_bias.note(own, 0.9)
    elsewhere = turn_bias.applying("formal", "Intel Xeon", 1, "b", "dev", known)
    assert elsewhere.how == "none" and elsewhere.se == pytest.approx(math.hypot(0.001, 0.004))
    assert turn_bias.applying("formal", "Intel Xeon", 4, "b", "dev", known).se == pytest.approx(math.hypot(0.04, 0.015))
    assert turn_bias.applying("demo", "AMD EPYC", 2, "b", "next", []) is None
    # three studied candidates: the class's random-effects prediction for a fourth
    data.write_text(entry(2, "next", -0.03, 0.01) + entry(2, "dev", 0.04, 0.015) + entry(2, "opt", 0.0, 0.01))
    across = turn_bias.applying("demo", "AMD EPYC", 2, "b", "new", turn_bias.corrections(data))
    expected = intervals.bias_bound([-0.03, 0.04, 0.0], [0.01, 0.015, 0.01], spread_level=0.5)
    assert across.how == "class" and across.bias == pytest.approx(expected.mean)
    assert across.se == pytest.approx(expected.prediction_se) and across.df == 1
    iv = intervals.RatioInterval(0.905, 0.915, 0.91, None, 0.9, 8, 8, 8, "signed-rank exact")
    assert intervals.runs_needed(iv, 0.90, 0.90) is not None
    assert intervals.runs_needed(iv, 0.90, 0.90, bias_half=0.02) is None  # 0.91 is within 2% of 0.90
    assert turn_bias.corrections()  # the corrections shipped with the suite parse


def test_a_corrected_interval_subtracts_the_bias_and_adds_its_error_in_quadrature():
    """Against an independent computation: a t interval (10 df) of a log ratio, a bias of -3% with a 2%
    standard error on 12 df. The corrected centre is the estimate less the bias; each end's distance is
    Welch-Satterthwaite's t times the two standard errors in quadrature, narrower than the old widening
    by the bias's whole bound and wider than the interval alone. A rank interval (asymmetric, normal)
    keeps each end's own distance."""
    est, se1, df1, bias, se2, df2 = math.log(0.95), 0.015, 10, -0.03, 0.02, 12
    q1 = stats.t.ppf(0.95, df1)
    lo, hi = math.exp(est - q1 * se1), math.exp(est + q1 * se1)
    got = intervals.correct_bias(lo, hi, math.exp(est), df1, 0.90, bias, se2, df2)
    v = se1 ** 2 + se2 ** 2
    df = v ** 2 / (se1 ** 4 / df1 + se2 ** 4 / df2)
    half = stats.t.ppf(0.95, df) * math.sqrt(v)
    assert got.estimate == pytest.approx(math.exp(est - bias)) and got.df == pytest.approx(df)
    assert (got.lower, got.upper) == (pytest.approx(math.exp(est - bias - half)), pytest.approx(math.exp(est - bias + half)))
    widened = q1 * se1 + abs(bias) + stats.t.ppf(0.95, df2) * se2
    assert q1 * se1 < half < widened
    rank = intervals.correct_bias(0.90, 1.00, 0.93, math.inf, 0.90, 0.0, 0.01, 12)
    assert math.log(0.93 / rank.lower) < math.log(rank.upper / 0.93)


def test_the_turn_bias_bound_is_a_random_effects_prediction_interval():
    """Cases that agree within their errors: no spread between cases, and the interval is the weighted
    mean +- t(k-2) times its standard error. Cases that disagree: the spread is where the generalized
    Q meets its chi-square quantile, and the interval widens with it. Three cases at least."""
    d, s = [-0.05, -0.03, -0.02, -0.04, -0.01], [0.02, 0.03, 0.02, 0.04, 0.03]
    b = intervals.bias_bound(d, s)
    w = 1 / np.square(s)
    mean = float((w * d).sum() / w.sum())
    half = stats.t.ppf(0.95, 3) * math.sqrt(1 / w.sum())
    assert b.between_sd == 0 and b.mean == pytest.approx(mean)
    assert (b.lower, b.upper) == (pytest.approx(mean - half), pytest.approx(mean + half))
    assert b.bound == pytest.approx(max(abs(mean - half), abs(mean + half)))
    apart = intervals.bias_bound([-0.2, 0.0, 0.15, -0.1, 0.1], s)
    tau2 = apart.between_sd ** 2
    wt = 1 / (np.square(s) + tau2)
    m = (wt * [-0.2, 0.0, 0.15, -0.1, 0.1]).sum() / wt.sum()
    q = float((wt * (np.array([-0.2, 0.0, 0.15, -0.1, 0.1]) - m) ** 2).sum())
    assert tau2 > 0 and q == pytest.approx(stats.chi2.ppf(0.25, 4))
    assert apart.upper - apart.lower > b.upper - b.lower
    assert intervals.bias_bound([0.01, 0.02], [0.01, 0.01]) is None


def test_each_shipped_turn_bias_correction_is_the_one_its_studies_give(root):
    """turn_bias.toml keeps each correction with the studies it came from: recomputed from that JSON,
    the same; every study of an entry measured its candidate (by commit where it recorded one) at its
    CPU count; each class with a study has MBA dev and MBA next studied."""
    shipped = turn_bias.corrections()
    assert shipped and all(c.data for c in shipped)
    for c in shipped:
        studies = [json.loads((root / path).read_text()) for path in c.data]
        assert all(study["cpus"] == c.cpus for study in studies), c
        assert all(study.get("candidate_sha", c.candidate) == c.candidate and
                   study.get("baseline_sha", c.baseline) == c.baseline for study in studies), c
        assert len({study["candidate"] for study in studies}) == 1, c
        found = turn_bias.correction_from(studies)
        assert (round(found.mean, 4), round(found.mean_se, 4), round(found.prediction_se, 4), found.df) == (
            c.bias, c.mean_se, c.se, c.df), (c, found)
    for cpus in {c.cpus for c in shipped}:
        assert {c.label for c in shipped if c.cpus == cpus} >= {"MBA dev", "MBA next"}, cpus


def test_a_case_measured_in_two_studies_counts_once_with_both_estimates_combined():
    one = [{"case": c, "turn_ms": 25.0, "pairs": 6, "log_difference": x, "se": 0.02}
           for c, x in zip("abcde", [-0.01, 0.0, 0.01, -0.02, 0.02])]
    again = [{**d, "se": 0.04, "log_difference": d["log_difference"] + 0.01} for d in one]
    both = turn_bias.correction_from([{"candidate": "x", "differences": one}, {"candidate": "x", "differences": again}])
    alone = turn_bias.correction_from([{"candidate": "x", "differences": one}])
    assert both.cases == alone.cases == 5
    # each case's estimate moves a fifth of the way to the other study's (weights 4 : 1)
    assert both.mean == pytest.approx(alone.mean + 0.01 / 5)
    # another candidate's study of the same cases: ten (candidate, case)s
    other = turn_bias.correction_from([{"candidate": "x", "differences": one}, {"candidate": "y", "differences": again}])
    assert other.cases == 10 and other.df == 8


def test_a_case_within_the_turn_bias_error_of_the_threshold_asks_for_runs_alone(tmp_path, small_turn_bias):
    """Pairs in turns 0.5% above the threshold, tightly: the interval with the correction's error in
    quadrature (0.5% se, 90%: about 0.8%) contains the threshold, and no number of pairs in turns would
    decide it; the report says to run alone (and does not count runs it has none for)."""
    host = [1.0, 0.8, 1.25, 0.9, 1.1, 0.85, 1.2, 0.95]
    pairs = [f"B/r{k + 1}p1" for k in range(len(host))]
    b = load.load_raw_side("b", duet_runs(tmp_path, "b", [1000 * h for h in host], pairs, share_cpu=True))
    c = load.load_raw_side("c", duet_runs(tmp_path, "c", [905 * h * (1 + 0.001 * (-1) ** k) for k, h in enumerate(host)],
                                          pairs, share_cpu=True))
    rep = analysis.build(b, c, threshold=0.90, min_runs=3)
    g = rep.gate.iloc[0]
    assert g.gate == "INCONCLUSIVE" and g.runs_needed is None and "within the turn-bias correction's own error" in g.note
    assert "runs alone (`--design solo`)" in views.decision_section(rep)


def test_the_looks_spend_the_error_by_the_spending_function():
    """Three looks at 3, 4 and 5 runs a side at a nominal 90%: against an independent simulation of the
    looks' estimates (partial sums of independent normal increments, one a run), every look's
    interval at its level covers together at 90% (within the simulation's error), each look spends
    what the Pocock-type function allots it, and the levels sit below Bonferroni's 0.9667 each."""
    levels = rules.look_levels(0.90, [3, 4, 5])
    assert all(level < 1 - 0.10 / 3 for level in levels) and levels[0] < levels[1] < levels[2]
    rng = np.random.default_rng(7)
    runs = rng.normal(size=(200_000, 5)).cumsum(axis=1)
    z = runs[:, [2, 3, 4]] / np.sqrt([3, 4, 5])  # each look's standardized estimate under no change
    crossed = np.abs(z) > stats.norm.ppf(0.5 + np.array(levels) / 2)
    first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), -1)
    spent = rules.spent(0.10, np.array([3, 4, 5]) / 5)
    for k in range(3):
        share = (first == k).mean()
        assert abs(share - (spent[k] - (spent[k - 1] if k else 0))) < 0.003, (k, share)
    assert abs(crossed.any(axis=1).mean() - 0.10) < 0.003
    # a look that cannot decide (too few pairs for a signed-rank interval at its level) spends nothing:
    # 3 and 4 pairs reach at most 0.75 and 0.875, so the last look (5 pairs: 0.9375) spends it all
    deciding = rules.deciding_looks(0.90, [3, 4, 5], lambda n, level: intervals.has_interval(n, level, True))
    assert deciding == {2: pytest.approx(0.90)}


def test_a_batch_of_looks_is_reported_at_the_level_of_the_look_it_stopped_at(tmp_path):
    """One until-decisive batch with a spending plan: the report decides at the level of the look the
    batch stopped at; several batches pooled: Bonferroni over all their looks."""
    until = until_decisive.plan({}, 3, 5, 30)
    assert until["levels"] == pytest.approx(rules.look_levels(0.90, [3, 4, 5]))
    path = tmp_path / "B1.json"
    path.write_text(json.dumps({"batch": "B1", "looks": 2, "until_decisive": until}))
    confidence, notes = until_decisive.stopping([str(path)], [SimpleNamespace(batches={"r1": "B1"})], 0.90)
    assert confidence == pytest.approx(until["levels"][1]) and "look 2" in notes[-1]
    assert "spent over the looks" in until_decisive.plan_line(until)


def test_the_candidates_verdict_has_a_stated_error_over_its_cases():
    """A candidate FAILs only where a case FAILs at the family's level (Bonferroni over the cases), and
    PASSes only where every case PASSes; the rule says both errors."""
    rows = [{"case": c, "gate": g, "lower": 0.8} for c, g in (("a", "FAIL"), ("b", "PASS"), ("c", "PASS"))]
    assert gate_mod.family_confidence(0.90, rows) == pytest.approx(1 - 0.10 / 3)
    at_family = [{**r, "gate": "INCONCLUSIVE" if r["case"] == "a" else r["gate"]} for r in rows]
    assert gate_mod.verdict(rows, at_family) == "INCONCLUSIVE"
    assert gate_mod.verdict(rows, rows) == "FAIL"
    assert gate_mod.verdict([{**r, "gate": "PASS"} for r in rows], rows) == "PASS"
    assert gate_mod.verdict([*rows, {"case": "d", "gate": "MISSING", "lower": None}], rows) == "INCOMPLETE"
    rule = gate_mod.verdict_rule(0.90, 1 - 0.10 / 7, 7)
    assert "a false PASS at most 5.0%" in rule and "a false FAIL at most 5.0%" in rule and "98.57%" in rule


def test_a_false_overall_fail_stays_within_its_error_when_every_case_sits_at_the_threshold():
    """Seven independent cases exactly at the threshold, each a t interval on 8 df: at each case's own
    90%, "FAIL if any case FAILs" fails about 30% of the candidates; at the family's level, at most 5%."""
    rng = np.random.default_rng(11)
    n, cases, df = 20_000, 7, 8
    estimates = rng.standard_t(df, size=(n, cases))  # in standard errors about the threshold
    own = (estimates + stats.t.ppf(0.95, df) < 0).any(axis=1).mean()
    family = (estimates + stats.t.ppf(1 - 0.05 / cases, df) < 0).any(axis=1).mean()
    assert own > 0.25 and family <= 0.05 + 0.004


def test_additivity_is_pooled_over_the_cases_against_the_share_margin():
    """Cases whose interactions agree within their errors: the pooled row is their inverse-variance mean
    (no spread between them), its interval the wider of t on k - 1 df and HKSJ's, and it decides where no
    case alone can; against an independent weighted mean."""
    shares, ses = [0.01, 0.02, 0.0, 0.015, 0.005, 0.012, 0.008], [0.03] * 7
    found = intervals.pooled(shares, ses, 0.90)
    w = 1 / np.square(ses)
    mean = float((w * shares).sum() / w.sum())
    assert found.mean == pytest.approx(mean) and found.between_sd == pytest.approx(0, abs=1e-9)
    half_t = stats.t.ppf(0.95, 6) * math.sqrt(1 / w.sum())
    assert found.upper - found.mean >= half_t - 1e-12 and found.cases == 7
    # each case alone spans +-4.9%: beyond the 5% margin; pooled, inside it
    assert stats.t.ppf(0.95, 8) * 0.03 > 0.05 - 0.02 and -0.05 < found.lower < found.upper < 0.05
