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

from mbaphases import interval, load, tables
from mbaphases.demo_repo import HISTORY, OPTIMIZATIONS, generate

CASE = "sac/g1_motion_tracking/mujoco"
ROUNDS = 9
# one physics thread: less jitter; episodes of 5 control steps: several resets per step
SIZES = ["--num-envs", "16", "--warmup-steps", "5", "--measure-steps", "40", "--replay-capacity-steps", "4",
         "--override", "task.episode_length_s=0.1", "--override", "sim.nthread=1"]
MEASURED = ("main", "mba-dev", *(c.name for c in OPTIMIZATIONS))
CONFIDENCE = 0.90
OTHER_SHARE = 0.5  # another phase may move with the own one, by at most this share of it
STORY = ("physics", "update_state", "reset_done")


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


def phase_change(base, cand, part):
    """The change of a phase (candidate - base, ms per vector step) with its 90% interval."""
    pb, pc = tables.attribution_parts(base, CASE), tables.attribution_parts(cand, CASE)
    return interval.difference_interval(pb[part], pc[part], CONFIDENCE)


@pytest.mark.parametrize("opt", OPTIMIZATIONS, ids=[c.name for c in OPTIMIZATIONS])
def test_an_optimization_is_attributed_to_its_own_phase(runs, opt):
    """The rule: the own phase's change interval lies wholly below 0; every other phase's
    interval contains 0, or its estimate (Hodges-Lehmann: the median of the 81 pairwise
    differences, which one slow run of the shared host does not move) is within half the own
    phase's change."""
    dev, cand = side(runs, "mba-dev"), side(runs, opt.name)
    own = phase_change(dev, cand, opt.phase)
    assert own.upper < 0, f"{opt.name}: {opt.phase} changed {own.estimate:+.3f} [{own.lower:+.3f}, {own.upper:+.3f}] ms"
    for part in STORY:
        if part == opt.phase:
            continue
        other = phase_change(dev, cand, part)
        small = abs(other.estimate) <= OTHER_SHARE * abs(own.estimate)
        assert other.contains(0.0) or small, (
            f"{opt.name}: {part} changed {other.estimate:+.3f} [{other.lower:+.3f}, {other.upper:+.3f}] ms "
            f"against {opt.phase} {own.estimate:+.3f} ms")


def test_mba_dev_loses_in_all_three_phases_against_main(runs):
    main, dev = side(runs, "main"), side(runs, "mba-dev")
    for part in STORY:
        change = phase_change(main, dev, part)
        assert change.lower > 0, f"{part}: {change.estimate:+.3f} [{change.lower:+.3f}, {change.upper:+.3f}] ms"
