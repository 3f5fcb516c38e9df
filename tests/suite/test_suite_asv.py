"""The asv suite end to end: real asv, a real generated git repository, the
real reference target at the tiny profile."""
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from asv import results as asv_results

from mbaphases import processes
from mbaphases.demo_repo import generate

pytestmark = pytest.mark.slow(seconds=105)  # real asv runs, installs or physics over many runs: minutes

ROOT = Path(__file__).resolve().parents[2]
CASES = 7
METRICS = ("entry_time_per_million_steps", "entry_active_time", "entry_env_step", "entry_physics", "entry_step_core",
           "entry_update_state", "entry_reset_done", "entry_replay", "entry_bookkeeping", "entry_resets_per_step")
SLOW_CASE = "flashsac/go2_joystick_flat/mujoco"
BROKEN_CASE = "sac/g1_walk_flat/motrix"


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t.invalid"})


def two_sided_pins(candidate_ref: str, label: str = "MBA dev") -> str:
    """The suite's pins with one candidate (the two-sided form)."""
    text = (ROOT / "pins.toml").read_text()
    head, rest = text.split("[baseline]", 1)
    rest = rest[rest.index("# the field's formal baseline"):]
    head = "\n".join(line for line in head.splitlines() if not line.startswith("reference"))
    # the tests of solo runs' behaviour (asv's interleaving, environments, faults) name their design; the
    # paired designs are tested with their flags (test_duet, test_published)
    head = head.replace('design = "turns"', 'design = "solo"')
    return (head + '[baseline]\nref = "main"\nlabel = "main direct"\n\n'
            f'[candidate]\nref = "{candidate_ref}"\nlabel = "{label}"\n\n' + rest)


def with_cases(pins_text: str, cases) -> str:
    """Pins cut to ``cases`` (a test that needs no more: each case is about 0.1 s of every run)."""
    return re.sub(r"cases = \[.*?\]", "cases = [" + ", ".join(f'"{c}"' for c in cases) + "]", pins_text, count=1,
                  flags=re.S)


def make_suite(tmp: Path, candidate_ref: str) -> Path:
    suite = tmp / "suite"
    suite.mkdir()
    for name in ("asv.conf.json", "asv.field.conf.json", "pins.toml", "pins.field.toml", "gate-exceptions.toml"):
        shutil.copy(ROOT / name, suite / name)
    # what asv's config runs: the benchmarks, the benchmark type, the install step (mbaphases.targets)
    for folder in ("benchmarks", "asv-plugin", "mbaphases"):
        shutil.copytree(ROOT / folder, suite / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    (suite / "pins.toml").write_text(two_sided_pins(candidate_ref))
    return suite


def summary_of(proc, out_dir) -> dict:
    """The report's summary.json, after checking that the command exited with its verdict's code (0:
    PASS, 1: any other verdict; ``proc`` a finished process or cli.main's return): where a test's
    input leaves the verdict open, the exit must still say the verdict the report wrote."""
    summary = json.loads((Path(out_dir) / "summary.json").read_text())
    code = getattr(proc, "returncode", proc)
    assert code == (0 if summary["verdict"] == "PASS" else 1), (code, summary["verdict"],
                                                               getattr(proc, "stderr", "")[-2000:])
    return summary


def classes_of(proc, out_dir) -> dict:
    """classes.json of a fleet batch's report (one report per hardware class), after checking its
    exit: 0 only where every class's report PASSes, each class's summary read from its folder."""
    doc = json.loads((Path(out_dir) / "classes.json").read_text())
    machines = {c["machine"] for cand in doc["candidates"] for c in cand["classes"]}
    verdicts = [json.loads((Path(out_dir) / m / "summary.json").read_text())["verdict"] for m in machines]
    assert machines and proc.returncode == (0 if set(verdicts) == {"PASS"} else 1), (proc.returncode, verdicts,
                                                                                  proc.stderr[-2000:])
    return doc


def found_of(proc, machine_dir) -> dict:
    """The newest search record of `mbaphases find`, after checking its exit says its answer (0: the
    commit found, 1: none named)."""
    search = json.loads(sorted((Path(machine_dir) / "find").glob("*.json"))[-1].read_text())
    assert proc.returncode == (0 if search["found"] is not None else 1), (proc.returncode, search["verdict"],
                                                                         proc.stdout[-2000:] + proc.stderr[-2000:])
    return search


def run_mbaphases(suite, *args, env=None, timeout=1500):
    return subprocess.run([sys.executable, "-m", "mbaphases.cli", *args], cwd=suite, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock"), **(env or {})})


@pytest.fixture(scope="module")
def ab(tmp_path_factory):
    """main vs a candidate that is slower on one case and broken on another."""
    tmp = tmp_path_factory.mktemp("ab")
    suite = make_suite(tmp, "slow-broken")
    shas = generate(suite / "demo-target")
    repo = suite / "demo-target"
    git(repo, "checkout", "-q", "-b", "slow-broken", "mba-dev")
    task = repo / "conf" / "_shared" / "task" / "go2_joystick_flat.yaml"
    task.write_text(task.read_text().replace("decimation: 4", "decimation: 64"))  # 16x the physics per step
    owner = repo / "conf" / "sac" / "task" / "g1_walk_flat" / "motrix.yaml"
    owner.write_text(owner.read_text() + "task:\n  decimation: 0\n")  # composes, fails in the physics step
    git(repo, "commit", "-qam", "slow go2, broken g1 walk on motrix")
    shas["slow-broken"] = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                                         text=True, check=True).stdout.strip()
    git(repo, "checkout", "-q", "main")
    p = run_mbaphases(suite, "run", "--profile", "tiny", "--runs", "3", "--python", sys.executable, "--machine", "testbox")
    return suite, shas, p


def test_three_samples_per_side_metric_and_case(ab):
    suite, shas, p = ab
    for branch in ("main", "slow-broken"):
        (res,) = asv_results.iter_results_for_machine_and_hash(str(suite / "results"), "testbox", shas[branch][:8])
        for metric in METRICS:
            key = f"collector.CollectorActive.{metric}"
            params = res.get_result_params(key)
            samples = res.get_result_samples(key, params)
            assert len(samples) == CASES
            for case_repr, s in zip(params[0], samples):
                if branch == "slow-broken" and case_repr.strip("'") == BROKEN_CASE:
                    assert not s or all(v is None for v in s)
                else:
                    assert s is not None and len(s) == 3, (branch, metric, case_repr, s)


def test_raw_runs_environment_and_interleaving(ab):
    suite, shas, p = ab
    metas = []
    for branch in ("main", "slow-broken"):
        raw = suite / "raw-runs" / "testbox" / shas[branch]
        for k in (1, 2, 3):
            for ext in ("json", "csv", "log", "meta.json"):
                assert (raw / f"run{k}.{ext}").stat().st_size > 0
            meta = json.loads((raw / f"run{k}.meta.json").read_text())
            assert meta["profile"]["name"] == "tiny" and meta["commit"] == shas[branch]
            env = meta["environment"]
            assert env["packages"]["mujoco"] and env["packages"]["torch"].startswith("2.13.0")
            assert env["logical_cpus"] >= 1 and env["kernel"] and "loadavg" in meta["load_start"]
            metas.append((meta["started"], branch))
    order = [b for _, b in sorted(metas)]
    assert order == ["main", "slow-broken", "slow-broken", "main", "main", "slow-broken"]


def test_failing_case_is_reported_with_side_and_run(ab):
    suite, shas, p = ab
    assert p.returncode == 1, "a failed case is a verdict on the run, not bad input (2)"
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 3
    assert all(BROKEN_CASE in line and "MBA dev (slow-broken)" in line for line in failed)
    assert {line.split("| run ")[1].split(" ")[0] for line in failed} == {"1", "2", "3"}


def test_compare_shows_the_slower_candidate_as_worse(ab):
    """asv's ratio is after/before of a lower-is-better time: > 1 reads as worse.
    With three samples asv's own significance test cannot fire, so it prints '~'."""
    suite, shas, p = ab
    out = subprocess.run([sys.executable, "-m", "asv", "compare", "--config", "asv.conf.json", "--machine", "testbox",
                          "main", "slow-broken"], cwd=suite, capture_output=True, text=True).stdout

    def ratio(metric):
        row = next(line for line in out.splitlines() if f"{metric}('{SLOW_CASE}')" in line)
        return float(row.split("|")[4].strip().lstrip("~"))

    assert ratio("entry_active_time") > 1.5, out
    assert ratio("entry_physics") > 1.5
    # throughput is stored lower-is-better (seconds per million env steps): the slower
    # candidate reads > 1 here, as 1 / the report's throughput ratio
    assert ratio("entry_time_per_million_steps") > 1.5
    r = run_mbaphases(suite, "report", "--out", str(suite / "compare-report"), "--machine", "testbox", "--quiet")
    s = json.loads((suite / "compare-report" / "summary.json").read_text())
    report_ratio = next(c for c in s["cases"] if c["case"] == SLOW_CASE)["throughput"]["ratio"]
    assert report_ratio < 1 and ratio("entry_time_per_million_steps") == pytest.approx(1 / report_ratio, rel=0.02), r.stderr


def test_report_from_asv_results(ab, tmp_path):
    suite, shas, p = ab
    r = run_mbaphases(suite, "report", "--out", str(tmp_path / "rep"), "--machine", "testbox", "--min-runs", "3")
    assert r.returncode == 1, r.stderr
    s = json.loads((tmp_path / "rep" / "summary.json").read_text())
    gates = {c["case"]: c for c in s["cases"]}
    assert gates[BROKEN_CASE]["gate"] == "MISSING"
    assert gates[SLOW_CASE]["gate"] == "MISALIGNED"  # decimation differs: not comparable
    assert "config" in gates[SLOW_CASE]["gate_detail"]["note"]
    assert gates[SLOW_CASE]["throughput"]["ratio"] < 0.7
    assert gates["sac/g1_walk_flat/mujoco"]["throughput"]["baseline"]["runs"] == 3
    assert s["candidate"]["revision"] == shas["slow-broken"]
    assert "packages.torch" in s["environment"]["baseline"]
    # the raw runs alone give the same throughput table
    raw = suite / "raw-runs" / "testbox"
    r2 = run_mbaphases(suite, "report", "--out", str(tmp_path / "raw"), "--baseline-raw", str(raw / shas["main"] / "run*.json"),
                       "--candidate-raw", str(raw / shas["slow-broken"] / "run*.json"))
    assert r2.returncode == 1, r2.stderr  # the same cases miss the gate
    s2 = json.loads((tmp_path / "raw" / "summary.json").read_text())
    for c in s2["cases"]:
        if c["case"] != BROKEN_CASE:
            assert c["throughput"]["baseline"]["median"] == pytest.approx(gates[c["case"]]["throughput"]["baseline"]["median"])


def test_publishing_keeps_the_report_page_asv_links_to(ab, tmp_path):
    """asv publish empties html/: the report page its index links to survives, linked again."""
    suite, shas, p = ab
    assert run_mbaphases(suite, "publish").returncode == 0
    r = run_mbaphases(suite, "report", "--out", str(tmp_path / "rep"), "--html", "html/mbaphases", "--machine", "testbox",
                      "--min-runs", "3")
    assert r.returncode == 1, r.stderr
    page = suite / "html" / "mbaphases" / "index.html"
    before = {f.relative_to(page.parent): f.read_bytes() for f in page.parent.rglob("*") if f.is_file()}
    assert 'href="mbaphases/index.html"' in (suite / "html" / "index.html").read_text()
    again = run_mbaphases(suite, "publish")
    assert again.returncode == 0, again.stderr
    after = {f.relative_to(page.parent): f.read_bytes() for f in page.parent.rglob("*") if f.is_file()}
    assert after == before and len(after) > 10
    assert (suite / "html" / "index.html").read_text().count('href="mbaphases/index.html"') == 1
    assert (suite / "html" / "graphs").is_dir() and not list(suite.glob(".mbaphases-pages-*"))


def graph_files(html: Path) -> list[Path]:
    return sorted(p.relative_to(html) for p in (html / "graphs").rglob("*.json"))


def test_a_run_of_other_pins_leaves_every_targets_results_publishable(ab):
    """Each pins file's runs have a results folder of their own (asv keeps one benchmark list per
    folder, rewritten by every run): a run of other pins (one case) leaves the suite's results and
    pages as they were, and `mbaphases publish` publishes both, the other under html/targets/<its name>/,
    linked from asv's index."""
    suite, shas, _ = ab
    assert run_mbaphases(suite, "publish").returncode == 0
    before, listed = graph_files(suite / "html"), (suite / "results" / "benchmarks.json").read_bytes()
    assert before
    text = (suite / "pins.toml").read_text()
    (suite / "pins.one-case.toml").write_text(with_cases(text, ["sac/g1_walk_flat/mujoco"]))
    r = run_mbaphases(suite, "run", "--pins", "pins.one-case.toml", "--profile", "tiny", "--runs", "1", "--python",
                      sys.executable, "--machine", "onebox")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (suite / "results" / "benchmarks.json").read_bytes() == listed
    assert not (suite / "results" / "onebox").exists() and (suite / "results-one-case" / "onebox").is_dir()
    p = run_mbaphases(suite, "publish")
    assert p.returncode == 0, p.stderr[-2000:]
    assert graph_files(suite / "html") == before
    other = graph_files(suite / "html" / "targets" / "one-case")
    assert any("machine-onebox" in str(g) for g in other)
    index = (suite / "html" / "index.html").read_text()
    assert index.count('href="targets/one-case/index.html"') == 1


def test_ab_of_two_refs_runs_reports_and_keeps_the_pins_it_used(ab):
    """`mbaphases ab BASE CAND --repo`: the pins file written beside the report, the run, the report
    and its page; the usual `report --pins` finds the run's config on its own afterwards."""
    suite, shas, _ = ab
    out = suite / "reports" / "ab"
    p = run_mbaphases(suite, "ab", "main", "mba-dev", "--repo", "demo-target", "--profile", "tiny", "--runs", "1",
                      "--cases", "sac/g1_walk_flat/mujoco", "--python", sys.executable, "--machine", "abbox",
                      "--out", str(out))
    summary = summary_of(p, out)
    pins_file = out / "pins.ab-main-vs-mba-dev.toml"
    pins = tomllib.loads(pins_file.read_text())
    assert pins["baseline"] == {"ref": "main", "label": "main"} and pins["candidates"][0]["ref"] == "mba-dev"
    assert pins["profile"] == "tiny" and pins["cases"] == ["sac/g1_walk_flat/mujoco"] and pins["runs"] == 1
    assert summary["candidate"]["revision"] == shas["mba-dev"]
    assert [c["case"] for c in summary["cases"]] == ["sac/g1_walk_flat/mujoco"]
    assert (out / "page" / "index.html").is_file() and f"page: {out / 'page' / 'index.html'}" in p.stdout
    assert "plan: 2 sides x 1 cases x 1 runs" in p.stdout
    record = json.loads(next((suite / "raw-runs" / "abbox" / "batches").glob("*.json")).read_text())
    # its own results folder: its one case must not hide the suite's seven from asv's pages
    conf = suite / "asv.ab-main-vs-mba-dev.resolved.conf.json"
    assert record["pins"] == str(pins_file.resolve()) and record["config"] == str(conf.resolve())
    assert json.loads(conf.read_text())["results_dir"] == "results-ab-main-vs-mba-dev"
    again = run_mbaphases(suite, "report", "--pins", str(pins_file), "--machine", "abbox", "--out", str(suite / "again"))
    assert summary_of(again, suite / "again")["cases"] == summary["cases"]


@pytest.mark.parametrize("args, needle", [
    (["--baseline", "no-such-branch", "--machine", "testbox"], "'no-such-branch' does not resolve"),
    (["--machine", "elsewhere"], "machine 'elsewhere'"),
])
def test_report_bad_revision_or_machine(ab, tmp_path, args, needle):
    suite, _, _ = ab
    r = run_mbaphases(suite, "report", "--out", str(tmp_path / "x"), *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("corruption, needle", [
    ("truncate", "cannot be read"),
    ("string", "'fast', not a number"),
    ("zero", "must be finite and > 0"),
])
def test_report_from_corrupted_asv_results_is_one_line(ab, tmp_path, corruption, needle):
    suite, shas, _ = ab
    results = tmp_path / "results"
    shutil.copytree(suite / "results", results)
    (path,) = (results / "testbox").glob(f"{shas['slow-broken'][:8]}-*.json")
    text = path.read_text()
    if corruption == "truncate":
        path.write_text(text[: len(text) // 2])
    else:
        doc = json.loads(text)
        row = doc["results"]["collector.CollectorActive.entry_time_per_million_steps"]
        samples = row[doc["result_columns"].index("samples")]
        samples[0] = ["fast", *samples[0][1:]] if corruption == "string" else [0.0 for _ in samples[0]]
        path.write_text(json.dumps(doc))
    r = run_mbaphases(suite, "report", "--out", str(tmp_path / "x"), "--results", str(results), "--machine", "testbox",
                      "--baseline", shas["main"], "--candidate", shas["slow-broken"])
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and needle in lines[0] and str(path.name) in lines[0], r.stderr
    assert not (tmp_path / "x").exists()


def test_report_with_results_dir_and_branch_names_says_why(ab, tmp_path):
    suite, _, _ = ab
    r = run_mbaphases(suite, "report", "--out", str(tmp_path / "x"), "--results", str(suite / "results"),
                      "--machine", "testbox", "--baseline", "main", "--candidate", "slow-broken")
    assert r.returncode == 2 and "no repository to resolve names" in r.stderr


def test_a_second_formal_run_waits_for_the_lock_and_says_so(ab):
    suite, shas, _ = ab
    holder = subprocess.Popen([sys.executable, "-c", "import time; from mbaphases.run.prepare import formal_run_lock\n"
                               "with formal_run_lock('test holder'):\n    print('held', flush=True); time.sleep(8)"],
                              env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock")}, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = run_mbaphases(suite, "run", "--profile", "tiny", "--runs", "1", "--python", sys.executable,
                          "--machine", "lockbox", "--sides", "MBA dev")
    finally:
        holder.kill()
    assert "waiting for the formal-run lock" in r.stderr and "test holder" in r.stderr, r.stderr[-2000:]
    metas = list((suite / "raw-runs" / "lockbox").glob("*/run*.meta.json"))
    assert len(metas) == 2
    for m in metas:
        lock = json.loads(m.read_text())["lock"]
        assert lock["alone"] and lock["waited_s"] >= 3 and "mbaphases run" in lock["held_by"]


def test_an_entry_run_started_outside_waits_for_the_lock(ab, tmp_path):
    """An asv run typed by hand while a formal run holds the machine: its entry run waits."""
    suite, shas, _ = ab
    holder = subprocess.Popen([sys.executable, "-c", "import time; from mbaphases.run.prepare import formal_run_lock\n"
                               "with formal_run_lock('formal run in progress'):\n    print('held', flush=True); time.sleep(6)"],
                              env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock")}, stdout=subprocess.PIPE, text=True)
    code = ("import sys; sys.path.insert(0, '.'); from benchmarks import _target\n"
            "with _target.hold_formal_run_lock('by hand') as lock:\n    print(lock)")
    try:
        assert holder.stdout.readline().strip() == "held"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MBAPHASES_LOCK_")}
        p = subprocess.run([sys.executable, "-c", code], cwd=suite, capture_output=True, text=True, timeout=120,
                           env={**env, "MBAPHASES_LOCK": str(suite / "formal.lock")})
    finally:
        holder.kill()
    assert "waiting for the formal-run lock" in p.stderr and "formal run in progress" in p.stderr
    assert "'alone': True" in p.stdout and "'waited_for': 'pid" in p.stdout


def processes_of(raw_dir: Path) -> list[int]:
    """Live processes started for runs that write under ``raw_dir`` (asv, its forkserver and
    benchmark processes, the entries, a pair block's process): they carry it in their environment, or,
    in a pair block, its staging store's, in the suite's ``.asv/blocks``."""
    return sorted(set(processes.with_env(f"MBAPHASES_RAW_DIR={raw_dir}"))
                  | set(processes.with_env(f"MBAPHASES_RAW_DIR={raw_dir.parent / '.asv' / 'blocks'}/", prefix=True)))


def test_run_bad_input(tmp_path):
    suite = make_suite(tmp_path, "mba-dev")
    r = run_mbaphases(suite, "run", "--profile", "huge")
    assert r.returncode == 2 and "unknown profile 'huge'" in r.stderr and "tiny" in r.stderr
    r = run_mbaphases(suite, "run", "--profile", "tiny", "--python", sys.executable)
    assert r.returncode == 2 and "demo-target" in r.stderr and "mbaphases demo-repo" in r.stderr


def test_demo_repository_is_reproducible(tmp_path):
    a, b = generate(tmp_path / "a"), generate(tmp_path / "b")
    assert a == b
    diff = subprocess.run(["git", "-C", str(tmp_path / "a"), "diff", "--name-only", "main", "mba-dev"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert diff == ["conf/_shared/base.yaml"]
    assert (tmp_path / "a" / "scripts" / "benchmark" / "rl" / "benchmark_offpolicy_collector_active.py").is_file()
