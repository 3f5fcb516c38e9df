"""The fleet on Ray (mbaphases run --fleet): a real Ray cluster of several nodes on this machine, token
authentication on, loopback only, the demo target at the tiny profile. Pair blocks spread over the
nodes' slots, a node under a second hardware label (a test-only setting) reported as its own class,
a batch whose files are shipped (the nodes check its commits out of a bundle, into a cache of their
own), a node that cannot make a side's environment, a node lost mid-block, Ctrl-C at the driver,
resume."""
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_suite_asv import ROOT, classes_of, found_of, make_suite, run_mbaphases, two_sided_pins

from mbaphases.demo_repo import generate
from mbaphases.run.executors.blocks import OWNER_FILE, STAGING_PREFIX, changed_hardware, sweep_orphans
from mbaphases.run.executors.shipping import BUNDLE_REFS
from mbaphases.run.prepare import git

pytestmark = pytest.mark.slow(seconds=320)  # a Ray cluster and real asv runs: minutes

# token authentication on; Ray's node address on the loopback interface (Ray names the host's own
# address otherwise), so nothing outside this machine reaches the test's cluster
TOKEN = secrets.token_hex(16)
CLUSTER_ENV = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
JOINING_S = 8  # Ray imported and its join begun (about 2 s on the 2-core VM)


@contextlib.contextmanager
def running_cluster(folder: Path, *args: str):
    """A real Ray cluster on this machine (tests/suite/ray_cluster.py ``args``), ended with the block."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("ray_cluster.py")), str(folder),
                             "--cache", str(folder / "node-cache"), *args],
                            env={**os.environ, **CLUSTER_ENV}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # the cluster's processes a group of their own
    try:
        assert _until(lambda: (folder / "address").exists() or proc.poll() is not None, 120), "the cluster started"
        assert proc.poll() is None, "the cluster started"
        yield Cluster(folder, (folder / "address").read_text())
    finally:
        (folder / "stop").write_text("")
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:  # its shutdown hung: nothing of the cluster may outlive the tests
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise


@pytest.fixture(scope="module")
def fleet_suite(tmp_path_factory):
    suite = make_suite(tmp_path_factory.mktemp("fleet"), "mba-dev")
    generate(suite / "demo-target")
    return suite


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, fleet_suite):
    """Two nodes of one slot each, the second under a test hardware label: every test of the module
    that leaves both nodes in place shares it (each under a machine name of its own)."""
    with running_cluster(tmp_path_factory.mktemp("cluster"), "--second-label", "second-class") as cluster:
        yield fleet_suite, cluster


@pytest.fixture
def own_fleet(tmp_path_factory, fleet_suite, request):
    """A cluster of the test's own (``request.param``: ray_cluster.py's arguments), for a test that
    changes its nodes or needs other ones: no other test sees what it did."""
    with running_cluster(tmp_path_factory.mktemp("own-cluster"), *request.param) as cluster:
        yield fleet_suite, cluster


@dataclass
class Cluster:
    folder: Path
    address: str

    def remove_node(self, i: int) -> None:
        (self.folder / f"remove-{i}").write_text("")
        assert _until(lambda: (self.folder / f"removed-{i}").exists(), 60)


def driver(suite, cluster, machine, *extra, env=None):
    args = ["run", "--fleet", cluster.address, "--design", "turns", "--profile", "tiny", "--machine", machine, *extra]
    return [sys.executable, "-m", "mbaphases.cli", *args], {**os.environ, **CLUSTER_ENV,
                                                            "MBAPHASES_LOCK": str(suite / "formal.lock"), **(env or {})}


def metas_of(suite, machine):
    return [json.loads(p.read_text()) for p in (suite / "raw-runs").glob(f"{machine}-*/*/run*.meta.json")]


def record_of(suite, machine):
    (path,) = (suite / "raw-runs" / machine / "batches").glob("*.json")
    return json.loads(path.read_text())


def test_blocks_spread_over_the_nodes_slots_and_each_hardware_class_is_reported_alone(fleet, tmp_path):
    suite, cluster = fleet
    rounds = 4
    cmd, env = driver(suite, cluster, "fleetbox", "--runs", str(rounds))
    p = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "fleet: 2 nodes of the Ray cluster" in p.stdout and "2 slots of 1 CPU" in p.stdout
    assert p.stdout.count("[fleet] block r") == rounds
    metas = metas_of(suite, "fleetbox")
    assert len(metas) == 2 * rounds and all(not m["failed_cases"] for m in metas)
    record = record_of(suite, "fleetbox")
    assert record["state"] == "finished" and record["recorded_runs"] == 2 * rounds
    blocks = record["fleet"]["blocks"]
    assert len(blocks) == rounds and len({b["node"] for b in blocks}) == 2, blocks
    machines = {b["machine"] for b in blocks}
    assert len(machines) == 2 and sum("second-class" in b["cpu"] for b in blocks) >= 1
    # never two blocks on one slot at once: a slot's pairs follow each other
    by_slot = {}
    for m in metas:
        span = by_slot.setdefault(tuple(m["fleet"]["cpus"]), {}).setdefault(m["duet"]["pair"], [m["started"], m["ended"]])
        span[0], span[1] = min(span[0], m["started"]), max(span[1], m["ended"])
    for spans in by_slot.values():
        ordered = sorted(spans.values())
        assert all(b[0] >= a[1] for a, b in zip(ordered, ordered[1:])), ordered
    # a run's files as a local run's: four files a run, asv's store holding every run of its class
    for machine in machines:
        for sha_dir in (suite / "raw-runs" / machine).iterdir():
            runs = sorted(x.name.split(".")[0] for x in sha_dir.glob("run*.meta.json"))
            for run in runs:
                assert all((sha_dir / f"{run}.{ext}").stat().st_size > 0 for ext in ("json", "csv", "log", "meta.json"))
            (stored,) = (suite / "results" / machine).glob(f"{sha_dir.name[:8]}-*.json")
            doc = json.loads(stored.read_text())
            samples = doc["results"]["collector.CollectorActive.entry_active_time"][doc["result_columns"].index("samples")]
            assert [len(s) for s in samples] == [len(runs)] * len(samples)
    r = run_mbaphases(suite, "report", "--machine", "fleetbox", "--min-runs", "1", "--out", str(tmp_path / "rep"),
                      env={"MBAPHASES_PROFILE": "tiny"})
    (cand,) = classes_of(r, tmp_path / "rep")["candidates"]
    assert {c["machine"] for c in cand["classes"]} == machines
    # the candidate's line: each class's verdict on its hardware, and whether they differ
    (line,) = [x for x in r.stdout.splitlines() if x.strip().startswith(f"{cand['candidate']}:")]
    assert ("hardware-dependent" in line) == (not cand["agree"]), line
    assert all(f"{c['verdict']} on {c['hardware']} ({c['nodes']} node" in line for c in cand["classes"]), line


def test_a_driver_without_token_authentication_is_refused_before_anything_runs(fleet):
    suite, cluster = fleet
    cmd, env = driver(suite, cluster, "nobody", "--runs", "1")
    env.pop("RAY_AUTH_MODE")
    p = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stderr.count("error:") == 1 and "token authentication" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    env["RAY_AUTH_MODE"] = "token"
    closed = subprocess.run(cmd[:cmd.index("--fleet") + 1] + ["127.0.0.1:9"] + cmd[cmd.index("--fleet") + 2:], cwd=suite,
                            env=env, capture_output=True, text=True, timeout=120)
    assert closed.returncode == 2 and "127.0.0.1:9 takes no connection" in closed.stderr, closed.stderr[-2000:]
    env["RAY_AUTH_TOKEN"] = secrets.token_hex(16)  # not the cluster's token
    p = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "cannot join the cluster" in p.stderr, p.stderr[-2000:]
    assert not (suite / "raw-runs" / "nobody").exists()


def test_a_loopback_address_joins_without_rays_loopback_setting(fleet):
    """The cluster's address on the loopback interface, the driver without
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (which Ray needs for it): the driver joins in seconds, where
    Ray alone would look for its node at the host's own IP for minutes."""
    suite, cluster = fleet
    env = {k: v for k, v in {**os.environ, **CLUSTER_ENV}.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    p = subprocess.run([sys.executable, "-c", "import sys\nfrom mbaphases.run.executors import ray_fleet\n"
                        "print(sorted(ray_fleet.connect(sys.argv[1], False).nodes.values()))", cluster.address],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip().startswith("[1"), p.stdout + p.stderr[-2000:]


def test_sigterm_while_the_driver_joins_ends_it_with_130(fleet):
    """A join that does not end (here Ray told to take this host's own IP for the loopback cluster's,
    where no node listens): SIGTERM ends the driver as any interrupt, exit 130 and one error line,
    not Ray's own exit with the signal's number; nothing was measured."""
    suite, cluster = fleet
    cmd, env = driver(suite, cluster, "joining", "--runs", "1", env={"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"})
    proc = subprocess.Popen(cmd, cwd=suite, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(JOINING_S)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err.count("error:") == 1, out[-2000:] + err[-2000:]
    assert "error: interrupted by SIGTERM" in err and "Traceback" not in err, err[-2000:]
    assert not metas_of(suite, "joining")


def _suite_processes(suite) -> list[str]:
    """Processes of this test's suite still running: the driver's (their command line names the suite)
    and the blocks' on the nodes (asv and the entries name their block's staging folder); this test's
    own process and its parents aside."""
    mine, pid = set(), os.getpid()
    while pid > 1:
        mine.add(pid)
        pid = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in mine:
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(suite) in cmdline or "mbaphases-block-" in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def _new_blocks_under_way(suite, before: set) -> list[Path]:
    """Pair blocks (their barrier folders) begun since ``before`` whose second case has started."""
    return [d for d in (suite / ".asv" / "duet").glob("*/r*") if d not in before and (d / "case1.0").exists()]


def _mid_blocks(suite, cluster, machine: str, rounds: int):
    """A fleet batch started as a terminal would start it (its own foreground group, SIGINT as default:
    a shell's background job starts with SIGINT ignored, and that would be inherited), returned once
    both nodes are inside a block (its second case begun)."""
    cmd, env = driver(suite, cluster, machine, "--runs", str(rounds))
    before = set((suite / ".asv" / "duet").glob("*/r*"))
    proc = subprocess.Popen(cmd, cwd=suite, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert _until(lambda: len(_new_blocks_under_way(suite, before)) >= 2, 300), "both nodes mid-block"
    return proc, cmd, env


def _until(predicate, timeout_s: float) -> bool:
    end = time.time() + timeout_s
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_ctrl_c_at_the_driver_ends_every_block_and_resume_goes_on(fleet):
    suite, cluster = fleet
    rounds = 4  # two blocks interrupted (one a node), two more for the resumed batch
    proc, cmd, env = _mid_blocks(suite, cluster, "stopbox", rounds)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    assert "interrupted" in out and "--resume" in out
    assert _until(lambda: not _suite_processes(suite), 30), _suite_processes(suite)
    kept = len(metas_of(suite, "stopbox"))
    assert kept < 2 * rounds
    p = subprocess.run(cmd + ["--resume"], cwd=suite, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "resuming batch" in p.stdout
    metas = metas_of(suite, "stopbox")
    pairs = {m["duet"]["pair"].split("/")[1].split(".")[0] for m in metas}
    assert pairs == {f"r{k + 1}p1" for k in range(rounds)} and len(metas) == 2 * rounds
    assert record_of(suite, "stopbox")["state"] == "finished"


def test_a_shipped_batch_runs_from_the_nodes_own_checkouts_of_a_bundle(fleet):
    """--fleet-files shipped: nothing of the driver's folder is read on a node; its commits arrive as a
    bundle and are checked out in the node's cache, the suite's folder through Ray's working_dir."""
    suite, cluster = fleet
    cmd, env = driver(suite, cluster, "shipbox", "--runs", "2", "--fleet-files", "shipped")
    p = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "sent to the nodes" in p.stdout and "pair environment of" not in p.stdout
    metas = metas_of(suite, "shipbox")
    assert len(metas) == 4 and all(not m["failed_cases"] for m in metas)
    cache = cluster.folder / "node-cache"
    (repo,) = (cache / "repos").iterdir()
    for m in metas:
        checkout = Path(m["entry"]["checkout"])
        assert checkout.is_relative_to(cache / "worktrees") and checkout.name == m["commit"], checkout
        assert git(repo, "rev-parse", f"{BUNDLE_REFS}/{m['commit']}") == m["commit"]
    record = record_of(suite, "shipbox")
    assert record["state"] == "finished" and record["fleet"]["files"] == "shipped"


@pytest.mark.parametrize("own_fleet", [("--second-label", "second-class")], indirect=True)
def test_a_node_that_cannot_make_a_sides_environment_says_why_and_the_block_goes_elsewhere(own_fleet):
    """A side whose lock cannot be installed: each node says why once, the block goes to the other
    node, and where every node refused, nothing is stored and the batch says so. Its own cluster: a
    shipped batch after it in the nodes' cache found its commits' refs missing (a random order)."""
    suite, cluster = own_fleet
    repo = suite / "demo-target"
    git(repo, "checkout", "-q", "-b", "broken-lock", "mba-dev")
    (repo / "requirements.lock").write_text("not-a-package @ file:///nonexistent/not_a_package-0-py3-none-any.whl\n")
    git(repo, "add", "requirements.lock")
    git(repo, "commit", "-qm", "a lock that cannot be installed")
    git(repo, "checkout", "-q", "main")
    (suite / "pins.broken-lock.toml").write_text(two_sided_pins("broken-lock"))
    cmd, env = driver(suite, cluster, "brokenbox", "--runs", "1", "--fleet-files", "shipped",
                      "--pins", "pins.broken-lock.toml")
    p = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]  # runs that did not happen: not a clean batch
    said = [line for line in p.stdout.splitlines() if "cannot run this batch's blocks" in line]
    assert len(said) == 2 and all("environment" in line for line in said), p.stdout[-3000:]
    assert "goes to node" in p.stdout and "every node of the fleet refused the batch" in p.stdout
    assert metas_of(suite, "brokenbox") == []
    assert {n[:8] for n in record_of(suite, "brokenbox")["fleet"]["refused"]} == {line.split()[2] for line in said}


FIND = ["find", "--phase", "physics", "--case", "sac/g1_walk_flat/mujoco", "mba-dev", "opt/mujoco-dispatch",
        "--runs", "2", "--max-batches", "1", "--design", "turns", "--profile", "tiny"]


def test_a_search_on_a_fleet_of_two_hardware_classes_is_refused_and_keeps_its_runs(fleet):
    """find decides within one hardware class: its first batch's blocks land on both nodes (one slot
    each), one under the second label, so the search stops, its runs kept under their classes."""
    suite, cluster = fleet
    p = run_mbaphases(suite, *FIND, "--fleet", cluster.address, "--machine", "findtwo", env=CLUSTER_ENV)
    assert p.returncode == 2 and p.stderr.count("error:") == 1, p.stdout[-3000:] + p.stderr[-3000:]
    assert "2 hardware classes" in p.stderr and "Traceback" not in p.stderr
    assert len(metas_of(suite, "findtwo")) == 4


@pytest.mark.parametrize("own_fleet", [("--second-label", "second-class")], indirect=True)
def test_a_node_lost_mid_block_has_its_block_run_again_on_another(own_fleet):
    """One of its own cluster's two nodes taken away while the blocks run."""
    suite, cluster = own_fleet
    rounds = 4
    proc, _, _ = _mid_blocks(suite, cluster, "lostbox", rounds)
    cluster.remove_node(1)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    metas = metas_of(suite, "lostbox")
    pairs = {}
    for m in metas:
        pairs.setdefault(m["duet"]["pair"].split("/")[1].split(".")[0], []).append(m)
    assert sorted(pairs) == [f"r{k + 1}p1" for k in range(rounds)], sorted(pairs)
    assert all(len(v) == 2 and v[0]["duet"]["pair"] == v[1]["duet"]["pair"] for v in pairs.values()), \
        "each block's two runs, from one execution of it"
    blocks = record_of(suite, "lostbox")["fleet"]["blocks"]
    assert len(blocks) == rounds


def test_a_node_whose_hardware_changes_inside_a_batch_is_refused():
    seen = {}
    first = {"node": "n1" * 8, "machine": "box-aaaaaa"}
    assert changed_hardware(seen, first) is None
    seen[first["node"]] = first["machine"]
    assert changed_hardware(seen, {**first}) is None
    why = changed_hardware(seen, {**first, "machine": "box-bbbbbb"})
    assert "box-aaaaaa" in why and "box-bbbbbb" in why and "not kept" in why


def test_a_staging_folder_whose_worker_is_gone_is_removed_by_the_next_block(tmp_path):
    """A worker killed with its node never removes its block's staging folder: the next block on the
    host does, and only folders whose named worker is gone."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    folders = {}
    for name, owner in (("gone", str(gone.pid)), ("alive", str(os.getpid())), ("unnamed", None)):
        folders[name] = tmp_path / f"{STAGING_PREFIX}{name}-x"
        (folders[name] / "raw-runs").mkdir(parents=True)
        if owner:
            (folders[name] / OWNER_FILE).write_text(owner)
    other = tmp_path / "not-a-block"
    other.mkdir()
    # what a killed worker's block leaves running (asv's forkserver), and a live block's process: each
    # in a session of its own, with its block's staging folder as HOME
    left, running = (subprocess.Popen(["sleep", "600"], env={**os.environ, "HOME": str(folders[name])},
                                      start_new_session=True) for name in ("gone", "alive"))
    try:
        assert sweep_orphans(tmp_path) == [folders["gone"]]
        assert left.wait(timeout=30) == -signal.SIGTERM and running.poll() is None
        assert not folders["gone"].exists() and folders["alive"].exists() and folders["unnamed"].exists()
        assert other.exists()
    finally:
        for proc in (left, running):
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("args, needle", [
    (["run", "--design", "solo"], "--fleet runs pair blocks"),
    (["run", "--design", "turns", "--until-decisive"], "--fleet with --until-decisive"),
    (["ab", "main", "mba-dev", "--repo", "demo-target", "--summary", "s.md"], "--summary with --fleet"),
])
def test_what_a_fleet_batch_cannot_be_is_one_error_line(fleet, args, needle):
    suite, cluster = fleet
    p = run_mbaphases(suite, *args, "--profile", "tiny", "--fleet", cluster.address, env=CLUSTER_ENV)
    assert p.returncode == 2 and p.stderr.count("error:") == 1 and needle in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("own_fleet", [("--nodes", "1")], indirect=True)
def test_a_search_runs_its_batches_on_a_fleet_of_one_class(own_fleet):
    """A cluster of one node, one class; the search's batches are fleet batches, its sides loaded
    from that class's runs."""
    suite, cluster = own_fleet
    p = run_mbaphases(suite, *FIND, "--fleet", cluster.address, "--machine", "findone", env=CLUSTER_ENV)
    assert "[fleet] block r1p1 ended" in p.stdout and "the search is recorded in" in p.stdout
    assert len(list((suite / "raw-runs" / "findone" / "find").glob("*.json"))) == 1
    search = found_of(p, suite / "raw-runs" / "findone")
    (batch,) = search["batches"]
    assert record_of(suite, "findone")["batch"] == batch and record_of(suite, "findone")["fleet"]["blocks"]
    (runs_under,) = {m["machine"] for m in metas_of(suite, "findone")}
    assert runs_under.startswith("findone-") and len(metas_of(suite, "findone")) == 4
