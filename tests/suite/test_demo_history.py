"""Known answers: the demo history's costs land in their own phases, and the gate decides them.

Each commit of the generated demo repository runs its own entry from its own
checkout (real physics, small sizes, short episodes so resets are frequent),
interleaved over rounds; the ledger built from the raw runs (the report's, at its
defaults: family-controlled marks, changes below 1% of the active time not marked)
must mark each optimization's gain in the phase it optimizes, no optimization may
move another phase of the story, and mba-dev's loss against main is marked in all three. The
gate, at the pins' threshold and confidence, FAILs mba-dev (its three costs) against main. (MBA
next's PASS is not decidable at this size: 12 solo runs a side gave it [0.868, 1.134], where
the threshold is 0.90.)
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mbaphases import gate, ledger, load
from mbaphases.demo_repo import HISTORY, OPTIMIZATIONS, generate
from mbaphases.stats import rules

pytestmark = pytest.mark.slow(seconds=190)  # real asv runs, installs or physics over many runs: minutes

CASE = "sac/g1_motion_tracking/mujoco"
ROUNDS = 12
ROUNDS_PER_BATCH = 4  # as the suite's batches: one `mbaphases run` of a few interleaved rounds
# one physics thread: less jitter; episodes of 5 control steps: several resets per step; 120
# measured steps: with another process spinning, a run's physics varies half as much as at 40
# steps (sd 0.44 against 0.81 ms, docs/log/measurements.md) for a fifth more time a run
MEASURE_STEPS = 120
ENTRY = "scripts/benchmark/rl/benchmark_offpolicy_collector_active.py"
ENTRY_ENV = {"UNILAB_COLLECTOR_TORCH_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}


def sizes(measure_steps: int = MEASURE_STEPS) -> list[str]:
    """The entry's size arguments (scripts/window_spread.py varies the measured steps)."""
    return ["--num-envs", "16", "--warmup-steps", "5", "--measure-steps", str(measure_steps),
            "--replay-capacity-steps", "4", "--override", "task.episode_length_s=0.1", "--override", "sim.nthread=1"]


MEASURED = ("main", "mba-dev", *(c.name for c in OPTIMIZATIONS))
CONFIDENCE = 0.90
STORY = ("physics", "update_state", "reset_done")
# The ledger selects its marks at a false discovery rate of 10%: with this family's seven real
# changes an unchanged phase is marked about one time in twenty, so "no other phase marked" fails
# with nothing wrong (2 of 20 fixtures in the one-hog log, docs/log/measurements.md). What must not be is an
# optimization's change showing up in a phase it does not touch (a leak of the attribution): the
# six other phases are tested at a family-wise 0.1%, split evenly (Bonferroni).
LEAK_FAMILY_ALPHA = 0.001


def checkouts(tmp: Path, names) -> dict[str, Path]:
    """The demo repository generated under ``tmp``, one worktree per commit name."""
    shas = generate(tmp / "demo")
    dirs = {name: tmp / name.replace("/", "_") for name in names}
    for name, path in dirs.items():
        subprocess.run(["git", "-C", str(tmp / "demo"), "worktree", "add", "-q", "--detach", str(path), shas[name]],
                       check=True, capture_output=True)
    return dirs


def run_file(tmp: Path, name: str, round_index: int) -> Path:
    return tmp / "raw" / name.replace("/", "_") / f"run{round_index + 1}.json"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("history")
    dirs = checkouts(tmp, MEASURED)
    files = {name: [] for name in MEASURED}
    env = {**os.environ, **ENTRY_ENV}
    for r in range(ROUNDS):
        order = MEASURED[r % len(MEASURED):] + MEASURED[:r % len(MEASURED)]
        for name in (order if r % 2 == 0 else order[::-1]):
            out = run_file(tmp, name, r)
            p = subprocess.run([sys.executable, ENTRY, "--cases", CASE, *sizes(), "--out-json", str(out)],
                               cwd=dirs[name], env=env, capture_output=True, text=True, timeout=600)
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


def blocked_side(runs, name):
    """A commit's runs in batches of consecutive rounds, as the suite records them: a shift of the
    shared host between batches cancels in the within-batch comparisons. Not one batch per round:
    with one run a side per batch the stratified interval is the sign test's, which a few runs
    slowed by another process push past 0 (measured: docs/log/measurements.md)."""
    s = side(runs, name)
    s.batches = {path: f"batch{k // ROUNDS_PER_BATCH + 1}" for k, path in enumerate(runs[1][name])}
    return s


def optimization_rows(runs):
    """The report's ledger at its defaults, every optimization against mba-dev, one row each."""
    dev = blocked_side(runs, "mba-dev")
    cands = [blocked_side(runs, c.name) for c in OPTIMIZATIONS]
    led, marks = ledger.ledger_table(dev, cands, [CASE], CONFIDENCE)
    assert marks.size == len(OPTIMIZATIONS) * len(ledger.LEDGER_PARTS)
    rows = led.to_dict("records")
    assert [row["candidate"] for row in rows] == [opt.name for opt in OPTIMIZATIONS]
    return rows


def described(name, row):
    return f"{name}: " + ", ".join(
        f"{p} {row[f'{p}_ms']:+.3f} [{row[f'{p}_lower_ms']:+.3f}, {row[f'{p}_upper_ms']:+.3f}] "
        f"p={row[f'{p}_p']:.2g} clear={row[f'{p}_clear']}" for p in STORY)


def test_the_ledger_marks_each_optimization_in_its_own_phase(runs):
    for opt, row in zip(OPTIMIZATIONS, optimization_rows(runs)):
        assert row[f"{opt.phase}_clear"] is True and row[f"{opt.phase}_upper_ms"] < 0, described(opt.name, row)


def test_no_optimization_moves_a_phase_it_does_not_touch(runs):
    rows = optimization_rows(runs)
    others = [(opt, part, row) for opt, row in zip(OPTIMIZATIONS, rows) for part in STORY if part != opt.phase]
    threshold = LEAK_FAMILY_ALPHA / len(others)
    for opt, part, row in others:
        assert row[f"{part}_p"] > threshold, f"{part} moved (threshold p {threshold:.2g}): {described(opt.name, row)}"


def test_mba_dev_loses_in_all_three_phases_against_main(runs):
    main, dev = blocked_side(runs, "main"), blocked_side(runs, "mba-dev")
    led, _ = ledger.ledger_table(main, [dev], [CASE], CONFIDENCE)
    row = led.iloc[0]
    for part in STORY:
        assert row[f"{part}_clear"] is True and row[f"{part}_lower_ms"] > 0, (
            f"{part}: {row[f'{part}_ms']:+.3f} [{row[f'{part}_lower_ms']}, {row[f'{part}_upper_ms']}]")


def test_the_gate_fails_mba_dev_against_main(runs):
    """The suite's known answer, decided from real runs: the whole interval of MBA dev's throughput
    ratio below the threshold, at the gate's defaults."""
    (row,) = gate.evaluate(blocked_side(runs, "main"), blocked_side(runs, "mba-dev"), [CASE], rules.DEFAULT_THRESHOLD,
                           3, {}, confidence=CONFIDENCE)
    said = f"{row['gate']} {row['estimate']:.3f} [{row['lower']:.3f}, {row['upper']:.3f}] {row['note']}"
    assert row["gate"] == "FAIL" and row["upper"] < rules.DEFAULT_THRESHOLD, said
