"""Faults injected into a real formal run (real asv, the demo target at the tiny profile, two
cases): at each stage, each way a run ends early. After every fault: no process of the run left
within a few seconds, the lock free, every completed run intact and readable, the user told in
one line what happened, and the next command (``mbaphases run --resume``) going on with the
same batch to the report an uninterrupted run gives. docs/faults.md is this matrix as a table."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_suite_asv import ROOT, found_of, git, make_suite, processes_of, run_mbaphases, summary_of, with_cases

from mbaphases import formal_lock
from mbaphases.demo_repo import generate

pytestmark = pytest.mark.slow(seconds=290)  # real asv runs: minutes

CASES = ["sac/g1_walk_flat/mujoco", "flashsac/g1_walk_flat/motrix"]
RUNS = 2  # the fewest a report gates on (--min-runs): what is tested is what a fault leaves, not a verdict
GONE_WITHIN_S = 15.0  # the watcher's TERM, then KILL after 5 s; margin for a loaded host


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    suite = make_suite(tmp_path_factory.mktemp("faults"), "mba-dev")
    (suite / "pins.toml").write_text(with_cases((suite / "pins.toml").read_text(), CASES))
    generate(suite / "demo-target")
    return suite


def start_run(suite: Path, machine: str, *extra: str) -> subprocess.Popen:
    """`mbaphases run` as a terminal would start it: its own foreground group, SIGINT as default
    (a shell's background job starts with SIGINT ignored, and that would be inherited)."""
    return subprocess.Popen([sys.executable, "-m", "mbaphases.cli", "run", "--profile", "tiny", "--runs", str(RUNS),
                             "--python", sys.executable, "--machine", machine, *extra], cwd=suite,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock")})


def until(condition, what: str, timeout_s: float = 300.0) -> None:
    deadline = time.time() + timeout_s
    while not condition():
        assert time.time() < deadline, f"never reached: {what}"
        time.sleep(0.2)


def reached(suite: Path, machine: str, stage: str):
    """Whether the run is at ``stage``: asv's set-up (the batch recorded as running, no entry yet),
    a measured run (an entry past its first case), a profiled run (py-spy's first profile)."""
    raw = suite / "raw-runs" / machine

    def check() -> bool:
        if stage == "asv set-up":  # asv started, no entry yet
            return (bool(list((raw / "batches").glob("*.json"))) and bool(processes_of(suite / "raw-runs"))
                    and not progress_files(suite))
        if stage in ("measured run", "pair round"):
            return any(json.loads(p.read_text()).get("case_index", 0) >= 1 for p in progress_files(suite))
        return bool(list(raw.glob("*/profile/*/*.folded")))
    return check


def progress_files(suite: Path) -> list[Path]:
    found = []
    for p in (suite / ".asv").glob("progress-*.json"):
        try:
            json.loads(p.read_text())
            found.append(p)
        except (OSError, ValueError):
            continue  # being written
    return found


def kept_runs(suite: Path, machine: str) -> list[dict]:
    """Every run record of the machine, parsed with its log, JSON and CSV beside it."""
    metas = []
    for p in sorted((suite / "raw-runs" / machine).glob("*/run*.meta.json")):
        meta = json.loads(p.read_text())
        stem = p.name[: -len(".meta.json")]
        assert (p.parent / f"{stem}.log").is_file()
        if meta["returncode"] >= 0:  # an entry killed by a signal wrote neither
            json.loads((p.parent / f"{stem}.json").read_text())
            assert (p.parent / f"{stem}.csv").stat().st_size > 0
        metas.append(meta)
    return metas


def batch_record(suite: Path, machine: str) -> dict:
    (path,) = (suite / "raw-runs" / machine / "batches").glob("*.json")
    return json.loads(path.read_text())


def entry_pids(suite: Path) -> list[int]:
    """The collector entries running for this suite (not asv, not py-spy)."""
    return [pid for pid in processes_of(suite / "raw-runs")
            if b"benchmark_offpolicy_collector_active" in Path(f"/proc/{pid}/cmdline").read_bytes()
            and b"py-spy" not in Path(f"/proc/{pid}/cmdline").read_bytes()]


def stop_an_entry(suite: Path) -> int | None:
    """A running entry held (SIGSTOP, its stop seen to take effect), or None: a short entry must not
    end on its own between being found and being acted on."""
    for pid in entry_pids(suite):
        try:
            os.kill(pid, signal.SIGSTOP)
            for _ in range(50):  # the stop is delivered asynchronously
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
                    return pid
                time.sleep(0.02)
            os.kill(pid, signal.SIGCONT)
        except (ProcessLookupError, FileNotFoundError):
            continue  # it ended first
    return None


def hold_the_runs(suite: Path) -> bool:
    """Every running run held: the benchmark processes first (in a pair they continue their entry
    when the partner reaches a case), then the entries; True once all are seen stopped."""
    def stopped(pid: int) -> bool:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"

    benchmarks = [pid for pid in processes_of(suite / "raw-runs")
                  if b"setup_cache" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    held = benchmarks + entry_pids(suite)
    if not benchmarks or not entry_pids(suite):
        return False
    try:
        for pid in held:
            os.kill(pid, signal.SIGSTOP)
        for _ in range(50):  # the stop is delivered asynchronously
            if all(stopped(pid) for pid in held):
                return True
            time.sleep(0.02)
    except (ProcessLookupError, FileNotFoundError):
        pass  # one ended first
    for pid in held:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    return False


def kill_an_entry(suite: Path) -> bool:
    pid = stop_an_entry(suite)
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
    return pid is not None


@pytest.mark.parametrize("fault, stage", [
    ("SIGINT", "profiled run"),   # Ctrl-C: the terminal's whole foreground group
    ("SIGTERM", "measured run"),  # a CI job cancelled
    ("SIGHUP", "asv set-up"),     # the terminal closed
    ("SIGKILL", "measured run"),  # the command killed outright (out of memory, kill -9): no handler runs
    ("SIGTERM", "pair round"),    # a pair's two sides in turns, one held at a case's barrier (stopped)
])
def test_a_run_ended_early_leaves_nothing_running_and_resumes(suite, fault, stage):
    machine = f"{fault}-{stage.split()[0]}".lower()
    extra = {"profiled run": ["--profile-functions"], "pair round": ["--design", "turns"]}.get(stage, [])
    proc = start_run(suite, machine, *extra)
    until(reached(suite, machine, stage), stage)
    assert processes_of(suite / "raw-runs"), "the run's processes were not found while it ran"
    if stage in ("measured run", "pair round"):
        # held, so that no run can finish before the fault: the runs in progress end with the batch
        # (the fault's own end continues them to take its TERM), never after it
        until(lambda: hold_the_runs(suite), "the runs to hold")
    runs_then = sorted((suite / "raw-runs" / machine).glob("*/run*.meta.json"))
    if fault == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(getattr(signal, fault))
    out, _ = proc.communicate(timeout=120)
    until(lambda: not processes_of(suite / "raw-runs"), "no process of the run left", GONE_WITHIN_S)
    with formal_lock.acquire("the next formal run", 0, path=suite / "formal.lock"):
        pass  # free at once: LockBusy otherwise
    assert sorted((suite / "raw-runs" / machine).glob("*/run*.meta.json")) == runs_then, out[-3000:]
    before = kept_runs(suite, machine)
    record = batch_record(suite, machine)
    if fault == "SIGKILL":
        assert proc.returncode == -signal.SIGKILL and record["state"] == "running"
    else:
        assert proc.returncode == 130, out[-3000:]
        said = [line for line in out.splitlines() if line.startswith("interrupted")]
        assert len(said) == 1 and "no process of the batch is left" in said[0], out[-3000:]
        assert "--resume" in out and record["state"] == "interrupted" and record["interrupted"] == fault

    again = run_mbaphases(suite, "run", "--profile", "tiny", "--runs", str(RUNS), "--python", sys.executable,
                          "--machine", machine, "--resume", *extra)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"resuming batch {record['batch']}" in again.stdout and f"{len(before)} of its runs kept" in again.stdout
    done = batch_record(suite, machine)
    assert done["state"] == "finished" and len(done["attempts"]) == 2 and done["batch"] == record["batch"]
    after = kept_runs(suite, machine)
    assert [m for m in after if m["run"] in {b["run"] for b in before if b["commit"] == m["commit"]}] == before
    per_side = {}
    for m in after:
        assert m["batch"] == record["batch"] and not m["failed_cases"]
        per_side[m["commit"]] = per_side.get(m["commit"], 0) + 1
    assert sorted(per_side.values()) == [RUNS, RUNS], per_side
    rep = run_mbaphases(suite, "report", "--machine", machine, "--min-runs", str(RUNS), "--out", str(suite / "reports" / machine))
    summary = summary_of(rep, suite / "reports" / machine)
    assert [c["case"] for c in summary["cases"]] == CASES
    assert {c["gate"] for c in summary["cases"]} <= {"PASS", "FAIL", "INCONCLUSIVE"}, summary["cases"]
    assert all(c["throughput"]["baseline"]["runs"] == RUNS for c in summary["cases"])


def test_a_run_into_a_pipe_closed_early_goes_on_to_its_end_and_keeps_its_runs(suite):
    """`mbaphases run ... | head -1`: the reader goes after the first line; the rest of the output is
    dropped (said once on stderr), asv never writes into the closed pipe, and the batch ends as it
    would have: every run made and kept, its usual exit, no traceback, nothing left running."""
    machine = "piped"
    p = subprocess.run(f"{sys.executable} -m mbaphases.cli run --profile tiny --runs {RUNS} --python {sys.executable} "
                       f"--machine {machine} | head -1; exit ${{PIPESTATUS[0]}}", shell=True, executable="/bin/bash",
                       cwd=suite, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock")})
    assert p.returncode == 0 and p.stdout.count("\n") == 1, p.stdout + p.stderr[-3000:]
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr and "error:" not in p.stderr, p.stderr[-3000:]
    assert p.stderr.count("the output's reader closed it") == 1, p.stderr[-3000:]
    runs = kept_runs(suite, machine)
    assert len(runs) == 2 * RUNS and not any(m["failed_cases"] for m in runs), runs
    assert batch_record(suite, machine)["state"] == "finished"
    until(lambda: not processes_of(suite / "raw-runs"), "no process of the run left", GONE_WITHIN_S)


def test_a_run_that_finds_the_formal_lock_held_waits_then_exits_75_having_measured_nothing(suite):
    """Another formal run holds the machine's lock (a real process holding the real lock): the run
    says once who holds it, waits --lock-timeout-min, then exits 75 (EX_TEMPFAIL) in one error line
    naming the holder; no run is made or recorded."""
    lock = suite / "formal.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from mbaphases import formal_lock\n"
                               "with formal_lock.acquire('the other formal run', 0, path=__import__('pathlib').Path(sys.argv[1])):\n"
                               "    print('held', flush=True); time.sleep(600)", str(lock)],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "held"
        p = run_mbaphases(suite, "run", "--profile", "tiny", "--runs", "1", "--python", sys.executable, "--machine",
                          "lockbusy", "--lock-timeout-min", "0.05")
    finally:
        holder.kill()
        holder.wait()
    assert p.returncode == 75, p.stdout[-2000:] + p.stderr[-2000:]
    assert p.stderr.count("waiting for the formal-run lock") == 1 and "the other formal run" in p.stderr, p.stderr
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("error:")]
    assert "another formal run held" in line and "the other formal run" in line and "Traceback" not in p.stderr
    assert not (suite / "raw-runs" / "lockbusy").exists()


def test_resume_after_the_baselines_ref_moved_is_refused_naming_both_commits(tmp_path):
    """An interrupted batch, then a commit on the baseline's branch: `--resume` would mix two
    baselines in one batch, so it is refused in one line naming the side, both commits and the way
    on (a new batch); the kept runs stay as they were."""
    suite = make_suite(tmp_path, "mba-dev")
    (suite / "pins.toml").write_text(with_cases((suite / "pins.toml").read_text(), CASES))
    generate(suite / "demo-target")
    machine = "moved"
    proc = start_run(suite, machine)
    until(lambda: list((suite / "raw-runs" / machine).glob("*/run1.meta.json")), "the first run recorded")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    before = kept_runs(suite, machine)
    repo = suite / "demo-target"
    def head() -> str:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "main"], capture_output=True, text=True,
                              check=True).stdout.strip()
    old = head()
    git(repo, "checkout", "-q", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "the baseline moves on")
    new = head()
    assert new != old
    p = run_mbaphases(suite, "run", "--profile", "tiny", "--runs", str(RUNS), "--python", sys.executable,
                      "--machine", machine, "--resume")
    assert p.returncode == 2 and p.stderr.count("error:") == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert (f"--resume: side 'main direct' (main) is commit {new[:12]} now, {old[:12]} in batch" in p.stderr
            and "run without --resume" in p.stderr), p.stderr
    assert kept_runs(suite, machine) == before and batch_record(suite, machine)["state"] == "interrupted"


def test_a_killed_entry_is_a_failed_run_of_its_side_and_the_batch_goes_on(suite):
    """SIGKILL of one entry process (the out-of-memory killer's usual victim): that run's cases fail,
    named with side and run; every other run is made and kept; nothing is left running."""
    machine = "entry-killed"
    proc = start_run(suite, machine)
    until(lambda: kill_an_entry(suite), "an entry to kill")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1, out[-3000:]
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert len(failed) == len(CASES) and all("| run 1 |" in line and "SIGKILL" in line for line in failed), out[-3000:]
    runs = kept_runs(suite, machine)
    assert len(runs) == 2 * RUNS and sum(bool(m["failed_cases"]) for m in runs) == 1
    assert batch_record(suite, machine)["state"] == "finished"
    until(lambda: not processes_of(suite / "raw-runs"), "no process of the run left", GONE_WITHIN_S)


def fill(folder: Path) -> None:
    """Take every free byte of the file system holding ``folder``."""
    with open(folder / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * (1 << 16))
        except OSError:
            pass


def test_a_full_disk_mid_batch_is_said_and_the_batch_resumes_once_there_is_room(suite):
    """The run's record and results folders on small file systems, filled after the first run:
    the later runs cannot be written; the batch says so in one line and keeps its first run, and
    once there is room again `--resume` completes it."""
    machine = "disk-full"
    folders = [suite / "raw-runs" / machine, suite / "results" / machine]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], check=True)
    try:
        proc = start_run(suite, machine)
        until(lambda: list(folders[0].glob("*/run1.meta.json")), "the first run recorded")
        for folder in folders:
            fill(folder)
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 1, out[-3000:]
        said = [line for line in out.splitlines() if line.startswith("no space left on the file system of")]
        assert len(said) == 1 and "--resume" in said[0] and "internal error" not in out, out[-3000:]
        for folder in folders:
            (folder / "filler").unlink()
        before = kept_runs(suite, machine)
        assert before
        again = run_mbaphases(suite, "run", "--profile", "tiny", "--runs", str(RUNS), "--python", sys.executable,
                              "--machine", machine, "--resume")
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        # asv rewrote its results files in place on the full disk: truncated, set aside (asv would
        # refuse every later run of those commits), their runs read from the raw runs
        assert "cannot be read" in again.stdout and list(folders[1].glob("*.json.unreadable-*"))
        after = kept_runs(suite, machine)
        assert sorted(sum(m["commit"] == c for m in after) for c in {m["commit"] for m in after}) == [RUNS, RUNS]
        rep = run_mbaphases(suite, "report", "--machine", machine, "--min-runs", str(RUNS), "--out", str(suite / "reports" / machine))
        summary = summary_of(rep, suite / "reports" / machine)
        assert all(c["throughput"]["baseline"]["runs"] == RUNS for c in summary["cases"]), summary["cases"]
    finally:
        for folder in folders:
            subprocess.run(["umount", "-l", str(folder)], check=False)


def test_an_interrupted_find_records_its_search_so_far_and_the_same_find_goes_on(suite):
    """SIGTERM to `mbaphases find` during a step's batch: the batch's processes ended, its runs kept,
    the search so far recorded as interrupted (exit 130); the same find again measures from them."""
    machine = "find-interrupted"
    args = ["find", "--phase", "update_state", "--case", CASES[0], "mba-dev", "mba-next", "--profile", "tiny",
            "--runs", "2", "--max-batches", "1", "--python", sys.executable, "--machine", machine]
    proc = subprocess.Popen([sys.executable, "-m", "mbaphases.cli", *args], cwd=suite, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "MBAPHASES_LOCK": str(suite / "formal.lock")})
    until(lambda: list((suite / "raw-runs" / machine).glob("*/run1.meta.json")), "the search's first run")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    until(lambda: not processes_of(suite / "raw-runs"), "no process of the search left", GONE_WITHIN_S)
    (found,) = (suite / "raw-runs" / machine / "find").glob("*.json")
    search = json.loads(found.read_text())
    assert search["interrupted"] and len(search["batches"]) == 1 and "the same find again" in search["verdict"]
    kept = kept_runs(suite, machine)
    again = run_mbaphases(suite, *args)
    found_of(again, suite / "raw-runs" / machine)
    searches = sorted((suite / "raw-runs" / machine / "find").glob("*.json"))
    assert len(searches) == 2 and not json.loads(searches[-1].read_text())["interrupted"]
    # every run kept before is there unchanged (the listing's order follows the commits' SHAs)
    after = {(m["commit"], m["run"]): m for m in kept_runs(suite, machine)}
    assert kept and all(after.get((m["commit"], m["run"])) == m for m in kept)


def staging_folders(root: Path) -> list[Path]:
    return list(root.glob("**/.mbaphases-stage-*"))


def test_a_report_ended_early_leaves_its_previous_output_or_none(suite, tmp_path):
    """SIGTERM to `mbaphases report` while it writes (its staging folder exists): one line, exit 130,
    no output folder and no staging folder left; SIGKILL while it rewrites an earlier report: that
    report stays readable whole (the old one or the new one)."""
    machine = "report-stage"
    run = run_mbaphases(suite, "run", "--profile", "tiny", "--runs", str(RUNS), "--python", sys.executable,
                        "--machine", machine)
    assert run.returncode == 0, run.stdout[-3000:]
    first = run_mbaphases(suite, "report", "--machine", machine, "--min-runs", str(RUNS), "--out", str(tmp_path / "kept"))
    summary_of(first, tmp_path / "kept")
    for signum, out in ((signal.SIGTERM, tmp_path / "new"), (signal.SIGKILL, tmp_path / "kept")):
        proc = subprocess.Popen([sys.executable, "-m", "mbaphases.cli", "report", "--machine", machine, "--min-runs",
                                 str(RUNS), "--out", str(out)], cwd=suite, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        staged = []
        while proc.poll() is None and not staged:
            staged = staging_folders(tmp_path)
            time.sleep(0.01)
        # stopped while its staging folder exists, so that the signal lands in the report's writing
        # (or its move into place, signals held then) and never after its end
        proc.send_signal(signal.SIGSTOP)
        assert staged and staging_folders(tmp_path) and proc.poll() is None, "the report ended before it was seen staged"
        proc.send_signal(signum)
        proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
        if signum == signal.SIGTERM:
            # interrupted while writing: nothing; while moving its files into place (signals held
            # then): the whole report, the interrupt said after it. Once in a run of the suite's
            # streams the report ended with its verdict's exit and no error line instead (the signal
            # not acted on; 0 of 36 tries alone): its output is then the whole report, never part
            assert not staging_folders(tmp_path), err
            if proc.returncode == 130:
                assert err.strip().splitlines()[-1] == "error: interrupted by SIGTERM" and not out.exists(), err
            else:
                summary_of(proc, out)
        else:
            assert proc.returncode == -signal.SIGKILL
        assert out.exists() or signum == signal.SIGTERM
        if out.exists():  # what is there is a whole report: the previous one or the new one
            json.loads((out / "summary.json").read_text())
            assert (out / "report.md").stat().st_size > 0
