"""From phase to function: the differential profile names the functions behind each phase's
change. Real entry runs of the demo history (main and mba-dev) at a small size, one profiled
run per side under py-spy beside the measured ones, the page opened in headless Chromium."""
import json
import os
import re
import subprocess
import sys
from xml.etree import ElementTree

import pandas as pd
import pytest
from test_report_page import CHROMIUM, open_in_chromium

from benchmarks import _target
from mbaphases import analysis, load, profiles, tables
from mbaphases import page as page_mod
from mbaphases.demo_repo import generate
from mbaphases.run.prepare import pyspy_path

pytestmark = pytest.mark.slow(seconds=30)  # real asv runs, installs or physics over many runs: minutes

ENTRY = "scripts/benchmark/rl/benchmark_offpolicy_collector_active.py"
CASE = "sac/g1_motion_tracking/mujoco"
RUNS = 3
PROFILE = {"name": "t", "num_envs": 16, "warmup_steps": 5, "measure_steps": 60, "replay_capacity_steps": 4,
           "torch_threads": 1, "overrides": ["task.episode_length_s=0.1", "sim.nthread=1"]}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("profiles")
    shas = generate(tmp / "demo")

    env = {**os.environ, "UNILAB_COLLECTOR_TORCH_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE",
           "MBAPHASES_PYSPY": pyspy_path()}
    sides = {}
    for name in ("main", "mba-dev"):
        checkout = tmp / name
        subprocess.run(["git", "-C", str(tmp / "demo"), "worktree", "add", "-q", "--detach", str(checkout), shas[name]],
                       check=True, capture_output=True)
        sides[name] = {"checkout": checkout, "runs": []}
    args = ["--cases", CASE, "--num-envs", "16", "--warmup-steps", "5", "--measure-steps", "40",
            "--replay-capacity-steps", "4"] + [x for o in PROFILE["overrides"] for x in ("--override", o)]
    for r in range(RUNS):
        for name in (("main", "mba-dev") if r % 2 == 0 else ("mba-dev", "main")):
            out = tmp / "raw" / name / f"run{r + 1}.json"
            p = subprocess.run([sys.executable, ENTRY, *args, "--out-json", str(out)], cwd=sides[name]["checkout"],
                               env=env, capture_output=True, text=True, timeout=600)
            assert p.returncode == 0, p.stderr[-2000:]
            sides[name]["runs"].append(str(out))
    for name in sides:
        # the suite's own profiled run: one per case, in a process of its own, never a sample
        _target.profile_functions({"active_profile": PROFILE, "cases": [CASE]}, sides[name]["checkout"], ENTRY,
                                  tmp / "profile" / name / "batch-1", env)
    return tmp, sides


def side(history, name):
    tmp, sides = history
    s = load.load_raw_side(name, sides[name]["runs"])
    s.profiles = profiles.side_profiles(tmp / "profile" / name)
    return s


def test_the_profiled_run_is_kept_with_its_command(history):
    tmp, _ = history
    record = json.loads((tmp / "profile" / "mba-dev" / "batch-1" / "profile.json").read_text())
    row = record["cases"][CASE]
    assert row["returncode"] == 0 and row["command"][1] == "record" and "--idle" in row["command"]
    # Python frames by default (pins profile_native adds native ones): no native unwinding at each sample
    assert row["native"] is False and "--native" not in row["command"]
    # read without pausing the target: py-spy's default stops the whole process at every sample
    assert "--nonblocking" in row["command"] and row["paused"] is False
    assert (tmp / "profile" / "mba-dev" / "batch-1" / row["folded"]).stat().st_size > 0


def test_mba_dev_against_main_names_the_functions_of_its_three_costs(history):
    main, dev = side(history, "main"), side(history, "mba-dev")
    pm, pd_ = profiles.load_case(main.profiles[CASE]), profiles.load_case(dev.profiles[CASE])
    ms_main = profiles.part_ms(tables.attribution_parts(main, CASE))
    ms_dev = profiles.part_ms(tables.attribution_parts(dev, CASE))
    fn = pd.DataFrame(profiles.function_rows(CASE, pm, pd_, ms_main, ms_dev, ["physics", "update_state", "reset_done"]))

    def top(phase):
        return list(fn[fn.phase == phase].function)

    # update_state: every term reading and deriving the engine state again (dev_costs.PER_TERM_STATE)
    assert any(f.startswith(("StateCache.reread", "Backend.read_fresh", "_reread_for_term")) for f in top("update_state")), \
        top("update_state")
    # physics on MuJoCo: one dispatch per substep (dev_costs.PER_SUBSTEP_DISPATCH)
    assert any(f.startswith("Backend.step_each_substep") for f in top("physics")), top("physics")
    # reset_done: the reset path env by env (dev_costs.PER_ENV_RESET)
    assert any(f.startswith(("ObservationManager.compute_keeping", "ObservationManager.save_terminal"))
               for f in top("reset_done")), top("reset_done")
    # scaled by the measured phase time: a function's time in a phase never exceeds the phase's
    assert (fn.total_candidate_ms <= fn.phase_candidate_ms + 1e-9).all()
    assert (fn.self_candidate_ms <= fn.total_candidate_ms + 1e-9).all()
    assert (fn.phase_change_ms - (fn.phase_candidate_ms - fn.phase_baseline_ms)).abs().max() < 1e-9
    # the report lists the phases the attribution flags (update_state's loss is never near 0 here)
    flagged, flames = profiles.compare(main, dev, tables.attribution_table(main, dev, [CASE])[0], [CASE])
    assert "update_state" in set(flagged.phase) and len(flagged[flagged.phase == "update_state"]) == profiles.TOP
    assert "<svg" in flames[CASE] and "rgb(255," in flames[CASE]


def test_the_page_shows_the_functions_and_the_flame_graph_in_chromium(history, tmp_path):
    rep = analysis.build(side(history, "main"), side(history, "mba-dev"), min_runs=RUNS, input_kind="raw entry JSON")
    assert len(rep.functions) and CASE in rep.flames
    page = page_mod.write_page(rep, tmp_path / "page")
    assert (tmp_path / "page" / "functions.csv").is_file() and list((tmp_path / "page" / "flames").glob("*.svg"))
    summary = json.loads((tmp_path / "page" / "summary.json").read_text())
    assert summary["functions"] and {"function", "delta_total_ms", "share_of_phase_change"} <= set(summary["functions"][0])
    assert "Functions behind the flagged phases" in (tmp_path / "page" / "report.md").read_text()
    assert CHROMIUM, "Debian's chromium is needed (scripts/run_tests.sh installs it)"
    dom, shot = open_in_chromium(tmp_path / "page", "index.html", tmp_path, "functions-page.png", height=6000)
    body = re.search(r"<body[^>]*>", dom.stdout)
    images = len(re.findall(r"<img ", page.read_text()))
    assert body and f'data-images="{images}/{images}"' in body.group(0), dom.stderr[-2000:]
    assert 'data-errors="0"' in body.group(0) and 'class="flame"' in dom.stdout
    assert "StateCache.reread" in dom.stdout or "Backend.read_fresh" in dom.stdout
    assert shot.stat().st_size > 50000


def test_every_written_svg_and_page_parses(history, tmp_path):
    rep = analysis.build(side(history, "main"), side(history, "mba-dev"), min_runs=RUNS, input_kind="raw entry JSON")
    page_mod.write_page(rep, tmp_path / "page")
    svgs = list((tmp_path / "page").rglob("*.svg"))
    assert svgs
    for path in svgs:
        ElementTree.parse(path)  # well-formed, or a browser shows nothing
    assert "functions.csv" in {p.name for p in (tmp_path / "page").iterdir()}


NATIVE = [
    # as py-spy --native records them from MotrixSim (Rust, v0 and legacy mangling) and pybind11 (C++ templates)
    "_RNvMNtNtNtNtCs75vJTIYSa2J_3std3sys4sync7condvar5futexNtB2_7Condvar4wait (libmotrixsim.so)",
    "_$LT$pyo3..pycell..PyRef$LT$T$GT$$u20$as$u20$pyo3..conversion..FromPyObject$GT$::extract_bound::h0123456789abcdef "
    "(motrixsim.abi3.so)",
    "_ZN4core3ptr13drop_in_place17h1234567890abcdefE (motrixsim.abi3.so)",
    "pybind11::detail::pyobject_caster<pybind11::object>::load(pybind11::handle, bool) & <lambda> (_mujoco.so)",
]


def test_native_frames_are_demangled_and_long_labels_stay_valid_xml(tmp_path):
    loop = "run (collector.py:10);_update_state (runtime.py:5)"
    lines = [f"{loop};{frame} {count}" for frame, count in zip(NATIVE, (40, 30, 20, 10))]
    (tmp_path / "b.folded").write_text("\n".join(lines) + "\n")
    (tmp_path / "c.folded").write_text("\n".join(line.replace(" 40", " 80") for line in lines) + "\n")
    base, cand = profiles.load_case(tmp_path / "b.folded"), profiles.load_case(tmp_path / "c.folded")
    names = {f for _, f in cand.total}
    assert "<std::sys::sync::condvar::futex::Condvar>::wait (libmotrixsim.so)" in names, names
    assert "core::ptr::drop_in_place (motrixsim.abi3.so)" in names, names
    assert ("<pyo3::pycell::PyRef<T> as pyo3::conversion::FromPyObject>::extract_bound (motrixsim.abi3.so)"
            in names), names
    assert not any("$LT$" in n or n.startswith(("_R", "_ZN")) for n in names)
    for width in (1200, 300, 90):  # labels cut at every width, the tooltip keeps the whole name
        svg = profiles.flame_svg("a <title> & more", base, cand, 2.0, 3.0, width=width)
        root = ElementTree.fromstring(svg)
        titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
        assert any(t.startswith("pybind11::detail::pyobject_caster<pybind11::object>") for t in titles)
        texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
        assert any(t.endswith("…") for t in texts) or width == 1200


def test_the_profilers_cost_is_measured_and_a_table_past_the_pinned_limit_is_marked(history):
    main, dev = side(history, "main"), side(history, "mba-dev")
    slow = [profiles.overhead(s, CASE) for s in (main, dev)]
    # each side's profiled run against its measured runs: a factor, never a guess
    assert all(x is not None and 0.2 < x < 20 for x in slow), slow
    att = tables.attribution_table(main, dev, [CASE])[0]
    for limit, marked in ((max(slow) * 0.99, True), (max(slow) * 1.01, False)):
        dev.pins = {**dev.pins, "profile_overhead_limit": limit}
        table, _ = profiles.compare(main, dev, att, [CASE])
        assert len(table) and set(table.distorted) == {marked}, (limit, slow)
        assert list(table.profiled_at_baseline.unique()) == [slow[0]]
