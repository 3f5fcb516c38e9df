"""The live line of a formal run, from the entry's progress file and the runs so far."""
import io
import json
import time

import pytest

from benchmarks import _target
from mbaphases import runner, staging
from mbaphases.runner import Progress
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
    metas = runner.run_meta(tmp_path / "raw", "box", 0.0, out)
    assert [m["run"] for m in metas] == [1]
    assert out.getvalue().strip().startswith("unreadable run record") and "run2.meta.json" in out.getvalue()
    (machine / "run3.json").write_text("{}")  # run 3 was interrupted before its meta
    assert _target._next_run(machine)[0] == 4
