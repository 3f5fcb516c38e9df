"""The live line of a formal run, from the entry's progress file and the runs so far."""
import io
import json
import time

import pytest

from benchmarks import _target
from mbaphases import estimate, load, staging
from mbaphases.run import design
from mbaphases.run.progress import Progress
from mbaphases.until_decisive import sides_for_round


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_line_names_run_side_case_and_eta(tmp_path):
    started = time.time() - 100
    raw = tmp_path / "raw"
    for k in (1, 2):  # two runs finished in the 100 s so far
        (raw / "sha1").mkdir(parents=True, exist_ok=True)
        (raw / "sha1" / f"run{k}.meta.json").write_text(json.dumps({"started": started + 1, "ended": started + 40 * k}))
    progress = tmp_path / "progress.json"
    progress.write_text(json.dumps({"commit": "sha2", "run": 2, "case_index": 3, "cases": 7,
                                    "case": "sac/g1_walk_flat/mujoco", "time": time.time()}))
    p = Progress(progress, {"sha2": "MBA dev (mba-dev)"}, 6, raw, started, Terminal())
    line = p.line()
    assert line.startswith("run 3/6 | MBA dev (mba-dev) | case 3/7 sac/g1_walk_flat/mujoco | elapsed 01:40")
    # 100 s for 2.5 runs: 40 s a run, 4 runs to go
    assert line.endswith("ETA 02:40")


def test_progress_is_quiet_when_not_a_terminal(tmp_path):
    out = io.StringIO()
    with Progress(tmp_path / "none.json", {}, 2, tmp_path, time.time(), out):
        pass
    assert out.getvalue() == ""


def test_an_extra_round_runs_only_the_open_candidates_and_the_baseline():
    sides = [{"role": "baseline", "label": "main"}, {"role": "candidate", "label": "dev"},
             {"role": "candidate", "label": "next"}, {"role": "candidate", "label": "opt"}]
    chosen = sides_for_round(sides, [("next", "a/b/c"), ("next", "d/e/f"), ("opt", "a/b/c")])
    assert [x["label"] for x in chosen] == ["main", "next", "opt"]
    assert [x["label"] for x in sides_for_round(sides, [])] == ["main"]


def test_files_are_written_whole_and_an_unreadable_run_record_is_named_and_left_out(tmp_path):
    """write_text_atomic leaves the file or its previous content, never a part, and no temporary;
    the batch's end names a run record it cannot read instead of ending there; a run number whose
    files an interrupted run left is never reused."""
    target = tmp_path / "run1.meta.json"
    staging.write_text_atomic(target, '{"a": 1}\n')
    staging.write_text_atomic(target, '{"a": 2}\n')
    assert json.loads(target.read_text()) == {"a": 2} and [p.name for p in tmp_path.iterdir()] == ["run1.meta.json"]
    with pytest.raises(IsADirectoryError):
        staging.write_text_atomic(tmp_path, "x")  # cannot replace a folder: nothing half-written is left
    assert [p.name for p in tmp_path.iterdir()] == ["run1.meta.json"]
    machine = tmp_path / "raw" / "box" / "abc"
    machine.mkdir(parents=True)
    (machine / "run1.meta.json").write_text(json.dumps({"started": 1.0, "run": 1}))
    (machine / "run2.meta.json").write_text('{"started": 2.0, "ru')  # an older writer's crash
    out = io.StringIO()
    metas = load.run_meta(tmp_path / "raw", "box", 0.0, out)
    assert [m["run"] for m in metas] == [1]
    assert out.getvalue().strip().startswith("unreadable run record") and "run2.meta.json" in out.getvalue()
    (machine / "run3.json").write_text("{}")  # run 3 was interrupted before its meta
    assert _target._next_run(machine)[0] == 4


def _batch(machine_dir, name, started, wall, runs, cases=7, profiled=False, setup=None, first_run_after=None):
    record = {"batch": name, "started": started, "wall_seconds": wall, "recorded_runs": runs,
              "cases": [f"a/b/c{i}" for i in range(cases)], "profile_functions": profiled}
    if setup is not None:
        record["setup_seconds"] = setup
    (machine_dir / "batches").mkdir(parents=True, exist_ok=True)
    (machine_dir / "batches" / f"{name}.json").write_text(json.dumps(record))
    if first_run_after is not None:  # a record written before batches kept their set-up time
        (machine_dir / "sha1").mkdir(exist_ok=True)
        (machine_dir / "sha1" / f"run-{name}.meta.json").write_text(
            json.dumps({"batch": name, "started": started + first_run_after}))


def test_the_estimate_leaves_out_an_environments_build(tmp_path):
    machine = tmp_path / "box"
    # the first batch built the environment for 300 s before its 12 runs of 7 cases (84 s of runs)
    _batch(machine, "20260101T000000-1", 1000.0, 384.0, 12, first_run_after=300.0)
    _batch(machine, "20260102T000000-1", 5000.0, 94.0, 12, setup=10.0)
    _batch(machine, "20260103T000000-1", 9000.0, 999.0, 12, profiled=True)  # ran another way
    rates = estimate.seconds_per_case_run(machine / "batches", profile_functions=False)
    assert rates == pytest.approx([1.0, 1.0])
    line = estimate.text(machine / "batches", "plan: 2 sides x 7 cases x 10 runs", 2, 7, 10, None, False)
    assert "estimate 2 min (from the 2 newest earlier batches" in line  # 140 s
    assert "no estimate yet" in estimate.text(tmp_path / "none" / "batches", "plan", 2, 7, 4, None, False)


@pytest.mark.parametrize("n", [2, 3, 5, 6])
def test_round_robin_duets_run_every_side_each_round_and_meet_every_pair(n):
    sides = [{"label": f"s{i}", "sha": f"{i:040d}"} for i in range(n)]
    met, rounds = set(), n - 1 if n % 2 == 0 else n
    for k in range(rounds):
        pairs = design.pairs_of_round(sides, None, "round-robin", k)
        runs = [x["label"] for pair in pairs for x in pair]
        assert all(a is not b for a, b in pairs)
        if n % 2 == 0:  # every side exactly once a round
            assert sorted(runs) == sorted(x["label"] for x in sides)
        else:  # the side meeting the bye runs with the baseline, which runs every round
            assert 1 <= runs.count("s0") <= 2 and all(1 <= runs.count(x["label"]) <= 2 for x in sides[1:])
            assert sum(runs.count(x["label"]) == 2 for x in sides) == 1
        met |= {frozenset((a["label"], b["label"])) for a, b in pairs}
    assert met == {frozenset((a["label"], b["label"])) for i, a in enumerate(sides) for b in sides[i + 1:]}
    # star: the baseline with every candidate, the reference with every other
    star = design.pairs_of_round(sides, "s1", "star")
    assert [(a["label"], b["label"]) for a, b in star][:n - 1] == [("s0", x["label"]) for x in sides[1:]]
    assert len(star) == (2 * n - 3 if n > 2 else 1)
