"""Known answers: the demo history's costs land in their own phases.

Each commit of the generated demo repository runs its own entry from its own
checkout (real physics, small sizes, short episodes so resets are frequent),
interleaved over rounds; the report built from the raw runs must attribute each
optimization's gain to the phase it optimizes, and mba-dev's loss against main
to all three.
"""
import json
import os
import subprocess
import sys

import pytest

from mbaphases import load, tables
from mbaphases.demo_repo import HISTORY, OPTIMIZATIONS, generate

CASE = "sac/g1_motion_tracking/mujoco"
ROUNDS = 9
# one physics thread: less jitter; episodes of 5 control steps: several resets per step
SIZES = ["--num-envs", "16", "--warmup-steps", "5", "--measure-steps", "40", "--replay-capacity-steps", "4",
         "--override", "task.episode_length_s=0.1", "--override", "sim.nthread=1"]
MEASURED = ("main", "mba-dev", *(c.name for c in OPTIMIZATIONS))
OWN_SHARE = 0.70


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("history")
    shas = generate(tmp / "demo")
    files = {name: [] for name in MEASURED}
    for name in MEASURED:
        subprocess.run(["git", "-C", str(tmp / "demo"), "worktree", "add", "-q", "--detach",
                        str(tmp / name.replace("/", "_")), shas[name]], check=True, capture_output=True)
    env = {**os.environ, "UNILAB_COLLECTOR_TORCH_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    for r in range(ROUNDS):
        order = MEASURED[r % len(MEASURED):] + MEASURED[:r % len(MEASURED)]
        for name in (order if r % 2 == 0 else order[::-1]):
            checkout = tmp / name.replace("/", "_")
            out = tmp / "raw" / name.replace("/", "_") / f"run{r + 1}.json"
            p = subprocess.run([sys.executable, "scripts/benchmark/rl/benchmark_offpolicy_collector_active.py",
                                "--cases", CASE, *SIZES, "--out-json", str(out)],
                               cwd=checkout, env=env, capture_output=True, text=True, timeout=600)
            assert p.returncode == 0, p.stderr[-2000:]
            files[name].append(str(out))
    return tmp, files


def side(runs, name):
    return load.load_raw_side(name, runs[1][name])


def test_each_commit_runs_its_own_code(runs):
    variants = {}
    for name in MEASURED:
        doc = json.loads(open(runs[1][name][0]).read())
        variants[name] = doc["results"][0]["case"]["runtime"]
    assert variants == {name: ("direct" if name == "main" else "mba") for name in MEASURED}
    history = {c.name: c for c in HISTORY}
    assert history["mba-dev"].costs == {"PER_SUBSTEP_DISPATCH", "PER_TERM_STATE", "PER_ENV_RESET"}
    assert not history["mba-next"].costs


@pytest.mark.parametrize("opt", OPTIMIZATIONS, ids=[c.name for c in OPTIMIZATIONS])
def test_an_optimization_is_attributed_to_its_own_phase(runs, opt):
    dev, cand = side(runs, "mba-dev"), side(runs, opt.name)
    (row,) = tables.attribution_table(dev, cand, [CASE]).to_dict("records")
    own = row[f"{opt.phase}_ms"]
    assert own < 0, f"{opt.name} did not make {opt.phase} faster: {row}"
    assert own / row["delta_sum_ms"] >= OWN_SHARE, f"{opt.name}: {opt.phase} carries {own / row['delta_sum_ms']:.0%}: {row}"
    pb, pc = tables.attribution_parts(dev, CASE), tables.attribution_parts(cand, CASE)
    for part in ("physics", "update_state", "reset_done"):
        spread = max(pb[part].max() - pb[part].min(), pc[part].max() - pc[part].min())
        if part == opt.phase:
            # against the typical run-to-run spread (interquartile range): one hiccup of the
            # shared host must not hide a real change
            iqr = max(float(x.quantile(0.75) - x.quantile(0.25)) for x in (pb[part], pc[part]))
            assert abs(own) > 2 * iqr, f"{opt.name}: {part} moved {own:+.3f} ms, spread (IQR) {iqr:.3f}"
            continue
        assert abs(row[f"{part}_ms"]) <= spread, f"{opt.name}: {part} moved {row[f'{part}_ms']:+.3f} ms, spread {spread:.3f}"


def test_mba_dev_loses_in_all_three_phases_against_main(runs):
    main, dev = side(runs, "main"), side(runs, "mba-dev")
    (row,) = tables.attribution_table(main, dev, [CASE]).to_dict("records")
    for part in ("physics", "update_state", "reset_done"):
        assert row[f"{part}_ms"] > 0, row
    assert row["delta_sum_ms"] > 0
