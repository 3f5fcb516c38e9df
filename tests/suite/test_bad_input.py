"""Every entry point under bad and careless input: one `error:` line on stderr
naming the bad value, exit 2, no traceback, no output changed. Exit 0/1 are
verdicts only; an internal error is 3 with its traceback in a named log."""
import copy
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import entry_docs as E
import pytest
from test_suite_asv import summary_of

from mbaphases import analysis, cli

ROOT = Path(__file__).resolve().parents[2]
CASE = "sac/g1_walk_flat/mujoco"
PINS = (ROOT / "pins.toml").read_text()


def snapshot(*dirs):
    return {str(p): p.read_bytes() for d in dirs if d.exists() for p in sorted(d.rglob("*")) if p.is_file()}


def runs(tmp, name, throughputs, host=None, **case_kw):
    paths = []
    for k, t in enumerate(throughputs, 1):
        doc = E.doc([E.case_result(CASE, env_step=E.active_for_throughput(t) - 1.0, **case_kw)])
        if host:
            doc["provenance"] = {"host": host}
        paths.append(E.write(tmp / f"{name}_run{k}.json", doc))
    return paths


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A folder with good raw runs for both sides and a previous report in out/."""
    monkeypatch.chdir(tmp_path)
    b = runs(tmp_path, "b", [1000, 1010, 990])
    c = runs(tmp_path, "c", [980, 990, 1000])
    summary_of(cli.main(["report", "--out", "out", "--baseline-raw", *b, "--candidate-raw", *c, "--quiet"]), "out")
    return tmp_path, b, c


def expect_usage_error(capsys, argv, needle, unchanged=()):
    before = snapshot(*unchanged)
    code = cli.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (argv, err)
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert "Traceback" not in err
    assert snapshot(*unchanged) == before, "output changed on bad input"


def write(path, text):
    Path(path).write_text(text) if isinstance(text, str) else Path(path).write_bytes(text)
    return str(path)


def doc_with(mutate):
    doc = E.doc([E.case_result(CASE)])
    mutate(doc)
    return json.dumps(doc) if not isinstance(doc, str) else doc


def _set(path, value):
    def mutate(doc):
        node = doc["results"][0]
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return mutate


# (name, files to write {name: text}, extra argv, needle)
REPORT_CASES = [
    ("exceptions a directory", {}, ["--exceptions", "."], "is a directory"),
    ("exceptions not UTF-8", {"exc.toml": b"\xff\xfe[[exception]]"}, ["--exceptions", "exc.toml"], "not UTF-8"),
    ("exception a table", {"exc.toml": f'[exception]\ncase = "{CASE}"\nreason = "r"\n'},
     ["--exceptions", "exc.toml"], "exception"),
    ("exception strings", {"exc.toml": 'exception = ["a", "b"]\n'}, ["--exceptions", "exc.toml"], "exception.0"),
    ("exceptions typo", {"exc.toml": f'[[exceptions]]\ncase = "{CASE}"\nreason = "r"\n'},
     ["--exceptions", "exc.toml"], "unknown key 'exceptions'"),
    ("duplicate exception", {"exc.toml": f'[[exception]]\ncase = "{CASE}"\nreason = "r"\n' * 2},
     ["--exceptions", "exc.toml"], "listed twice"),
    ("exception threshold bool", {"exc.toml": f'[[exception]]\ncase = "{CASE}"\nreason = "r"\nthreshold = true\n'},
     ["--exceptions", "exc.toml"], "threshold"),
    ("exception threshold inf", {"exc.toml": f'[[exception]]\ncase = "{CASE}"\nreason = "r"\nthreshold = inf\n'},
     ["--exceptions", "exc.toml"], "not a finite number"),
    ("exceptions missing", {}, ["--exceptions", "nope.toml"], "nope.toml not found"),
    ("pins missing", {}, ["--pins", "nope.toml"], "nope.toml not found"),
    ("pins threshold string", {"p.toml": PINS.replace("threshold = 0.90", 'threshold = "x"')},
     ["--pins", "p.toml"], "gate.threshold: 'x' is not of type number"),
    ("pins min_runs string", {"p.toml": PINS.replace("min_runs = 3", 'min_runs = "abc"')},
     ["--pins", "p.toml"], "gate.min_runs"),
    ("pins exceptions int", {"p.toml": PINS.replace('exceptions = "gate-exceptions.toml"', "exceptions = 5")},
     ["--pins", "p.toml"], "gate.exceptions"),
    ("pins cases string", {"p.toml": PINS.replace("cases = [", 'cases = "x"\nold_cases = [')},
     ["--pins", "p.toml"], "pins file p.toml"),
    ("pins threshold negative", {"p.toml": PINS.replace("threshold = 0.90", "threshold = -1")},
     ["--pins", "p.toml"], "pins file p.toml: gate.threshold: -1 must be > 0"),
    ("threshold inf", {}, ["--threshold", "inf"], "--threshold inf"),
    ("threshold nan", {}, ["--threshold", "nan"], "--threshold nan"),
    ("threshold negative", {}, ["--threshold", "-1"], "--threshold -1"),
    ("dispersion negative", {}, ["--dispersion-limit", "-1"], "--dispersion-limit -1"),
    ("dispersion nan", {}, ["--dispersion-limit", "nan"], "--dispersion-limit nan"),
    ("min runs zero", {}, ["--min-runs", "0"], "--min-runs 0"),
    ("html a file", {"page.html": "x"}, ["--html", "page.html"], "--html page.html is a file"),
    ("same label", {}, ["--baseline-label", "x", "--candidate-label", "x"], "share the label 'x'"),
]


@pytest.mark.parametrize("name, files, extra, needle", REPORT_CASES, ids=[c[0] for c in REPORT_CASES])
def test_report_bad_options(work, capsys, name, files, extra, needle):
    tmp, b, c = work
    for fname, text in files.items():
        write(tmp / fname, text)
    expect_usage_error(capsys, ["report", "--out", "out", "--baseline-raw", *b, "--candidate-raw", *c, *extra],
                       needle, unchanged=[tmp / "out"])


RAW_CASES = [
    ("a list", "[1, 2]", "not an offpolicy_collector_active"),
    ("errors as strings", None, "an entry of 'errors' is str"),
    ("throughput a string", doc_with(_set(["collector_active_steps_per_sec"], "fast")), "'fast', not a number"),
    ("throughput zero", doc_with(_set(["collector_active_steps_per_sec"], 0)), "must be finite and > 0"),
    ("throughput negative", doc_with(_set(["collector_active_steps_per_sec"], -5.0)), "must be finite and > 0"),
    ("throughput infinite", doc_with(_set(["collector_active_steps_per_sec"], 1e999)).replace("Infinity", "1e999"),
     "must be finite and > 0"),
    ("phase negative", doc_with(_set(["phase_ms_per_vector_step", "replay_ms", "samples_ms"], [-1.0, 1.0])),
     "must be finite and >= 0"),
    ("no args", doc_with(lambda d: d.pop("args")), "no 'args'"),
    ("empty results", doc_with(lambda d: d["results"].clear()), "measured nothing"),
    ("duplicate case", doc_with(lambda d: d["results"].append(copy.deepcopy(d["results"][0]))), "appears twice"),
    ("truncated", doc_with(lambda d: None)[:200], "not valid JSON"),
]


@pytest.mark.parametrize("name, text, needle", RAW_CASES, ids=[c[0] for c in RAW_CASES])
def test_report_bad_raw_runs(work, capsys, name, text, needle):
    tmp, b, c = work
    if text is None:
        doc = E.doc([E.case_result(CASE)], errors=["boom"])
        text = json.dumps(doc)
    bad = write(tmp / "bad.json", text)
    expect_usage_error(capsys, ["report", "--out", "new", "--baseline-raw", *b, "--candidate-raw", *c[:2], bad],
                       needle, unchanged=[tmp / "out"])
    assert not (tmp / "new").exists(), "no output directory is left behind"


def test_report_same_run_twice_or_on_both_sides(work, capsys):
    tmp, b, c = work
    expect_usage_error(capsys, ["report", "--out", "out", "--baseline-raw", *b, b[0], "--candidate-raw", *c],
                       "given twice", unchanged=[tmp / "out"])
    expect_usage_error(capsys, ["report", "--out", "out", "--baseline-raw", *b, "--candidate-raw", *c[:2], b[0]],
                       "same run as", unchanged=[tmp / "out"])
    copy_of = write(tmp / "copy.json", Path(b[1]).read_text())
    expect_usage_error(capsys, ["report", "--out", "out", "--baseline-raw", *b, copy_of, "--candidate-raw", *c],
                       "same content", unchanged=[tmp / "out"])


def test_out_an_existing_file_or_not_writable(work, capsys):
    tmp, b, c = work
    write(tmp / "file", "keep me")
    expect_usage_error(capsys, ["report", "--out", "file", "--baseline-raw", *b, "--candidate-raw", *c],
                       "--out file is a file", unchanged=[tmp / "out"])
    expect_usage_error(capsys, ["report", "--out", "file/sub", "--baseline-raw", *b, "--candidate-raw", *c],
                       "is a file, not a directory", unchanged=[tmp / "out"])
    assert (tmp / "file").read_text() == "keep me"


def test_runs_are_files_not_names(tmp_path, monkeypatch, capsys):
    """Three run1.json from three folders are three runs, kept apart on the page too."""
    monkeypatch.chdir(tmp_path)
    sides = {}
    for side, thr in (("b", [1000, 1010, 990]), ("c", [1000, 1005, 995])):
        sides[side] = []
        for k, t in enumerate(thr):
            (tmp_path / side / f"d{k}").mkdir(parents=True)
            sides[side] += runs(tmp_path / side / f"d{k}", "run", [t])
    assert all(Path(p).name == "run_run1.json" for p in sides["b"])
    code = cli.main(["report", "--out", "out", "--html", "page", "--baseline-raw", *sides["b"],
                     "--candidate-raw", *sides["c"], "--quiet"])
    assert code == 0, capsys.readouterr().err
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["cases"][0]["throughput"]["baseline"]["runs"] == 3
    assert len(list((tmp_path / "page" / "raw" / "baseline").glob("*.json"))) == 3


def test_sides_on_different_hardware_are_misaligned_unless_declared(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    small = {"cpu": "AMD EPYC", "logical_cpus": "2", "gpu": "none", "node": "vm"}
    big = {"cpu": "Xeon Platinum", "logical_cpus": "32", "gpu": "NVIDIA H100", "node": "gpubox"}
    b = runs(tmp_path, "b", [1000, 1010, 990], host=small)
    c = runs(tmp_path, "c", [5000, 5050, 4950], host=big)
    assert cli.main(["report", "--out", "out", "--baseline-raw", *b, "--candidate-raw", *c, "--quiet"]) == 1
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["verdict"] == "INCOMPLETE" and s["cases"][0]["gate"] == "MISALIGNED"
    note = s["cases"][0]["gate_detail"]["note"]
    assert "different hardware" in note and "Xeon Platinum" in note and "logical_cpus (2 vs 32)" in note
    assert cli.main(["report", "--out", "out2", "--baseline-raw", *b, "--candidate-raw", *c, "--quiet",
                     "--cross-machine"]) == 0
    first = (tmp_path / "out2" / "report.md").read_text().splitlines()[0]
    assert first.startswith("**Cross-machine comparison, declared intended") and "gpubox" in first


def test_zero_throughput_never_passes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    b = [E.write(tmp_path / f"b{k}.json", E.doc([{**E.case_result(CASE), "collector_active_steps_per_sec": 0.0}]))
         for k in range(3)]
    c = runs(tmp_path, "c", [1000, 1000, 1000])
    expect_usage_error(capsys, ["report", "--out", "out", "--baseline-raw", *b, "--candidate-raw", *c],
                       "b0.json: collector_active_steps_per_sec")
    assert not (tmp_path / "out").exists()


def test_report_into_a_closed_pipe_keeps_the_verdict(work):
    tmp, b, c = work
    p = subprocess.run(f"{sys.executable} -m mbaphases.cli report --out piped --baseline-raw {' '.join(b)} "
                       f"--candidate-raw {' '.join(c)} | head -1; exit ${{PIPESTATUS[0]}}",
                       shell=True, executable="/bin/bash", cwd=tmp, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
    summary_of(p, tmp / "piped")  # the verdict's exit, and the report whole


def test_internal_error_is_exit_3_with_a_log(work, capsys, monkeypatch):
    tmp, b, c = work

    def broken(*a, **k):
        raise RuntimeError("a bug")
    monkeypatch.setattr(analysis, "build", broken)
    assert cli.main(["report", "--out", "x", "--baseline-raw", *b, "--candidate-raw", *c]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "internal error RuntimeError: a bug" in err[0]
    log = Path(err[0].rsplit("traceback in ", 1)[1].rstrip(")"))
    assert "Traceback" in log.read_text()


# --- demo-repo -----------------------------------------------------------------------------

def test_demo_repo_never_replaces_what_it_did_not_make(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()
    write(tmp_path / "notes" / "mine.txt", "precious")
    write(tmp_path / "a-file", "x")
    user_repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(user_repo)], check=True)
    write(user_repo / "work.py", "uncommitted")
    for path, needle in (("notes", "not empty and was not made"), ("a-file", "is a file"),
                         (".", "not empty and was not made"), ("repo", "not empty and was not made")):
        expect_usage_error(capsys, ["demo-repo", "--path", path], needle,
                           unchanged=[tmp_path / "notes", user_repo])
    assert (tmp_path / "notes" / "mine.txt").read_text() == "precious"
    assert cli.main(["demo-repo", "--path", "demo"]) == 0
    assert cli.main(["demo-repo", "--path", "demo"]) == 0, "its own directory is regenerated"
    (tmp_path / "empty").mkdir()
    assert cli.main(["demo-repo", "--path", "empty"]) == 0


# --- run and publish -------------------------------------------------------------------------

def test_run_and_publish_bad_input(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # a lock of its own: a formal run elsewhere on the machine must not hold this test
    monkeypatch.setenv("MBAPHASES_LOCK", str(tmp_path / "formal.lock"))
    write(tmp_path / "pins.toml", PINS)
    write(tmp_path / "norepo.json", '{"version": 1, "project": "x"}')
    expect_usage_error(capsys, ["publish", "--config", "missing.json"], "asv config missing.json not found")
    expect_usage_error(capsys, ["run", "--config", "norepo.json"], "'repo' is a required property")
    expect_usage_error(capsys, ["run", "--pins", "missing.toml"], "missing.toml not found")
    write(tmp_path / "bad.toml", re.sub(r"^runs = \d+", "runs = 0", PINS, flags=re.M))
    expect_usage_error(capsys, ["run", "--pins", "bad.toml"], "runs: 0 must be >= 1")
    write(tmp_path / "bad.toml", PINS + "\n[extra]\nx = 1\n")
    expect_usage_error(capsys, ["run", "--pins", "bad.toml"], "unknown key 'extra'")
    expect_usage_error(capsys, ["run", "--deadline-min", "0"], "--deadline-min 0.0 must be > 0")
    expect_usage_error(capsys, ["run", "--design", "trio"], "invalid choice: 'trio'")
    expect_usage_error(capsys, ["run", "--turn-ms", "-5"], "--turn-ms -5.0 must be > 0")
    write(tmp_path / "bad.toml", PINS.replace('design = "turns"', 'design = "trio"'))
    expect_usage_error(capsys, ["run", "--pins", "bad.toml"], "design")


# --- the reference target's entry ------------------------------------------------------------

ENTRY_CASES = [
    (["--override", "algo.num_envs=abc"], "algo.num_envs must be int"),
    (["--override", "sim.nthread=0"], "sim.nthread must be >= 1"),
    (["--override", "+foo=1"], "adding or deleting keys"),
    (["--override", "task.observation.noise_lin_vel=nan"], "must be finite"),
    (["--override", "task.decimation=0"], "task.decimation must be >= 1"),
    (["--seed", "-1"], "--seed=-1"),
    (["--out-json", "{tmp}"], "is a directory"),
    (["--out-json", "{tmp}/file/r.json"], "is not writable"),
    (["--out-csv", "{tmp}"], "--out-csv"),
]


@pytest.mark.parametrize("args, needle", ENTRY_CASES, ids=[" ".join(a) for a, _ in ENTRY_CASES])
def test_entry_bad_input(tmp_path, args, needle):
    write(tmp_path / "file", "x")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = ["--out-json", str(tmp_path / "r.json")] if "--out-json" not in args else []
    p = subprocess.run([sys.executable, "-m", "reflab.bench", "--cases", CASE, "--num-envs", "8", "--warmup-steps", "1",
                        "--measure-steps", "2", *out, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1 and needle in lines[0], p.stderr
    assert not (tmp_path / "r.json").exists()


def script_refuses(script: str, args: list[str], cwd: Path, needle: str, timeout_s: float = 120) -> None:
    """The contract for a script of scripts/: exit 2, one `error:` line naming ``needle``, nothing on stdout."""
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout_s)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], p.stderr
    assert not p.stdout


@pytest.mark.parametrize("args, needle", [(["unilab[mujoco]==9.9.9"], "unilab[mujoco]==9.9.9"),
                                          (["unilab==1.3.0", "--bogus"], "--bogus"), ([], "requirement")])
def test_physics_layer_scan_bad_input(args, needle):
    """scripts/physics_layer_line.py: a release the registry does not have, or a bad flag: one line."""
    script_refuses("physics_layer_line.py", args, ROOT, needle, timeout_s=300)


@pytest.mark.parametrize("args, needle", [(["--machine", "nowhere"], "--machine nowhere: no stored runs"),
                                          ([], "--machine"), (["--machine", "x", "--window", "0"], "--window 0"),
                                          (["--machine", "x", "--by-run", "--by-pair"], "--by-run, --by-pair"),
                                          (["--machine", "x", "--allocation"], "no batch with runs")])
def test_noise_components_bad_input(tmp_path, args, needle):
    """scripts/noise_components.py: a machine without runs, a missing flag, a window of 0, two
    tables at once, an allocation without a batch to plan from: one line."""
    (tmp_path / "raw-runs" / "x").mkdir(parents=True)
    script_refuses("noise_components.py", args, tmp_path, needle)


@pytest.mark.parametrize("args, needle", [
    (["--candidate", "nope"], "no commit 'nope'"), (["--candidate", "HEAD", "--turns", "25,abc"], "--turns '25,abc'"),
    (["--candidate", "HEAD", "--rounds", "1"], "--rounds 1"), (["--candidate", "HEAD", "--turns", "0"], "--turns '0'")])
@pytest.mark.two_cpus  # the script needs two one-CPU slots: on one CPU that is its first refusal
def test_turn_bias_bad_input(tmp_path, args, needle):
    """scripts/turn_bias.py: a ref the repository lacks, turn lengths that are not lengths, one
    round (no spread): one line, nothing run."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                    "-m", "one"], check=True)
    script_refuses("turn_bias.py", ["--repo", str(repo), "--baseline", "HEAD", "--case", "sac/g1_walk_flat/motrix", *args],
                   tmp_path, needle)
    assert subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True,
                          check=True).stdout.count("\n") == 1, "no checkout left behind"


@pytest.mark.parametrize("args, needle", [(["--machine", "nowhere"], "--machine nowhere: no stored runs"),
                                          ([], "--machine"), (["--machine", "x"], "no profiled run")])
def test_profiled_slowdown_bad_input(tmp_path, args, needle):
    """scripts/profiled_slowdown.py: a machine without runs, a missing flag, runs without profiles:
    one line."""
    (tmp_path / "raw-runs" / "x").mkdir(parents=True)
    script_refuses("profiled_slowdown.py", args, tmp_path, needle)


@pytest.mark.parametrize("args, needle", [([], "--checkout"), (["--checkout", "nowhere"], "--checkout nowhere"),
                                          (["--checkout", ".", "--reps", "0"], "--reps 0"),
                                          (["--checkout", ".", "--rate", "5"], "--rate 5")])
def test_profiler_cost_bad_input(tmp_path, args, needle):
    """scripts/profiler_cost.py: no checkout, one without an entry, no repetitions, a rate py-spy
    cannot keep: one line, nothing run."""
    script_refuses("profiler_cost.py", args, tmp_path, needle)


@pytest.mark.parametrize("args, needle", [(["--times", "0"], "--times 0"), (["--command", "nope"], "--command 'nope'"),
                                          (["--other", "nowhere", "--times", "1"], "nowhere: not a checkout")])
def test_cli_startup_bad_input(tmp_path, args, needle):
    """scripts/cli_startup.py: no repetitions, a command the suite does not have, a folder that is not
    a checkout: one line, nothing timed."""
    script_refuses("cli_startup.py", args, tmp_path, needle)


# --- random corruptions of real raw runs ---------------------------------------------------------

@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real")
    out = tmp / "run.json"
    p = subprocess.run([sys.executable, "-m", "reflab.bench", "--cases", f"{CASE},sac/g1_walk_flat/motrix",
                        "--num-envs", "8", "--warmup-steps", "1", "--measure-steps", "3", "--out-json", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "UNILAB_COLLECTOR_TORCH_THREADS": "1"})
    assert p.returncode == 0, p.stderr
    return json.loads(out.read_text())


def _leaves(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(node, list) and node:
        for i, v in enumerate(node):
            yield from _leaves(v, (*path, i))
    else:
        yield path


def corrupt(doc: dict, rng: random.Random) -> str:
    doc = copy.deepcopy(doc)
    kind = rng.choice(["swap", "nan", "inf", "negative", "duplicate", "drop", "truncate"])
    leaves = [p for p in _leaves(doc) if p and p[0] in ("results", "errors", "args")]
    path = rng.choice(leaves)
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if kind == "swap":
        parent[path[-1]] = rng.choice(["text", None, [], {}, True])
    elif kind in ("nan", "inf", "negative"):
        parent[path[-1]] = {"nan": float("nan"), "inf": float("inf"), "negative": -1.0}[kind]
    elif kind == "duplicate":
        doc["results"].append(copy.deepcopy(rng.choice(doc["results"])))
    elif kind == "drop":
        parent.pop(path[-1]) if isinstance(parent, dict) else parent.pop()
    text = json.dumps(doc)
    return text[: rng.randrange(len(text))] if kind == "truncate" else text


def test_random_corruptions_end_in_a_verdict_or_one_line(real_run, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rng = random.Random(20261202)
    good = []
    for k in range(3):
        good.append(write(tmp_path / f"good{k}.json", json.dumps({**real_run, "created_at": f"good {k}"})))
    outcomes = set()
    for i in range(60):
        runs_c = []
        for k in range(3):
            text = corrupt({**real_run, "created_at": f"{i} {k}"}, rng) if k == 0 else \
                json.dumps({**real_run, "created_at": f"{i} {k}"})
            runs_c.append(write(tmp_path / f"c{i}_{k}.json", text))
        code = cli.main(["report", "--out", f"out{i}", "--baseline-raw", *good, "--candidate-raw", *runs_c, "--quiet"])
        err = capsys.readouterr().err
        assert code in (0, 1, 2), (i, err)
        outcomes.add(code == 2)
        if code == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), (i, err)
            assert not (tmp_path / f"out{i}").exists()
        else:
            s = json.loads((tmp_path / f"out{i}" / "summary.json").read_text())
            for case in s["cases"]:
                ratio = case["throughput"]["ratio"]
                assert ratio is None or 0 < ratio < 1e6, (i, case)
    assert outcomes == {True, False}, "the corruptions must reach both the verdict and the error path"


@pytest.mark.parametrize("args, needle", [
    (["not a requirement!", "unilab==1.5.2"], "BASE 'not a requirement!' is not a requirement"),
    (["unilab==1.4.0"], "CAND is missing"),
    (["unilab==1.4.0", "unilab==1.4.0"], "BASE and CAND are the same"),
    (["unilab==1.4.0", "--swap", "unisim-core"], "--swap 'unisim-core' names no version"),
    (["unilab==1.4.0", "unilab==1.5.2", "--profile", "huge"], "--profile 'huge' is not a profile"),
    (["unilab==1.4.0", "unilab==1.5.2", "--runs", "0"], "--runs 0 must be >= 1"),
    (["unilab==1.4.0", "unilab==1.5.2", "--cases", "go2"], "--cases 'go2' is not <algo>/<task>/<sim>"),
    (["unilab==1.4.0", "unilab==1.5.2", "--python", sys.executable], "--python runs refs of a repository"),
    (["main", "mba-dev", "--repo", "nowhere"], "--repo nowhere is not a git repository"),
    (["main", "--repo", ".", "--swap", "x==1"], "--swap replaces a package of an installed requirement"),
    (["unilab==1.4.0", "unilab==1.5.2", "--summary", "."], "--summary . is a directory"),
    (["unilab==1.4.0", "unilab==1.5.2", "--deadline-min", "-1"], "--deadline-min -1.0 must be > 0"),
    (["unilab==1.4.0", "unilab==1.5.2", "--design", "trio"], "invalid choice: 'trio'"),
])
def test_ab_bad_input_leaves_nothing(tmp_path, monkeypatch, capsys, args, needle):
    """Refused before anything is written or measured: no report folder, no pins file."""
    for name in ("asv.conf.json", "pins.toml", "pins.unilab.toml", "gate-exceptions.toml"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    expect_usage_error(capsys, ["ab", *args], needle, unchanged=[tmp_path])
    assert not (tmp_path / "reports").exists()
