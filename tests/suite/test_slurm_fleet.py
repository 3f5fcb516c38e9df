"""The fleet on Slurm (mbaphases run --fleet slurm): a real single-node Slurm of this machine (Debian's
slurm-wlm and munge, their daemons started for these tests with a configuration, a munge key and
ports of their own), the demo target at the tiny profile. Each pair block is one job of one slot's
CPUs; Ctrl-C at the driver cancels the jobs and leaves no process of the suite."""
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_fleet import _suite_processes, _until, metas_of
from test_suite_asv import classes_of, make_suite, run_mbaphases

from mbaphases.demo_repo import generate

# Slurm's daemons and real asv runs: a minute or two; a node of the host's CPUs
pytestmark = [pytest.mark.slow(seconds=120), pytest.mark.two_cpus]

CONF = """ClusterName=mbaphases-test
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={folder}/munge.socket
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} CPUs={cpus} State=UNKNOWN
PartitionName=blocks Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """munged, slurmctld and slurmd of their own (nothing of the machine's own Slurm or munge used),
    stopped at the end with every job they ran."""
    folder = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    key = folder / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    conf = folder / "slurm.conf"
    conf.write_text(CONF.format(host=socket.gethostname().split(".")[0], folder=folder, ctld_port=_free_port(),
                                d_port=_free_port(), cpus=os.cpu_count()))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    subprocess.run(["munged", "--force", f"--key-file={key}", f"--socket={folder}/munge.socket",
                    f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
                    f"--seed-file={folder}/munged.seed"], check=True)
    try:
        subprocess.run(["slurmctld", "-f", str(conf)], check=True, env=env)
        subprocess.run(["slurmd", "-f", str(conf)], check=True, env=env)
        up = lambda: "idle" in subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True,
                                              env=env).stdout
        assert _until(up, 60), (folder / "slurmd.log").read_text()[-2000:]
        yield folder, env
    finally:
        subprocess.run(["scancel", "--partition=blocks"], env=env, capture_output=True)
        for daemon in ("slurmd", "slurmctld", "munged"):
            pid_file = folder / f"{daemon}.pid"
            if pid_file.exists():
                pid = int(pid_file.read_text())
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
                assert _until(lambda pid=pid: not Path(f"/proc/{pid}").exists(), 30), f"{daemon} ended"


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    suite = make_suite(tmp_path_factory.mktemp("slurmfleet"), "mba-dev")
    generate(suite / "demo-target")
    return suite


def driver(suite, env, machine, *extra):
    return ([sys.executable, "-m", "mbaphases.cli", "run", "--fleet", "slurm", "--design", "turns", "--profile", "tiny",
             "--machine", machine, *extra], {**env, "MBAPHASES_LOCK": str(suite / "formal.lock")})


def test_each_block_is_a_job_of_one_slots_cpus_and_comes_back_whole(slurm, suite, tmp_path):
    folder, env = slurm
    rounds = 2
    cmd, env = driver(suite, env, "slurmbox", "--runs", str(rounds))
    p = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "of the Slurm partition (default)" in p.stdout and p.stdout.count("[fleet] block r") == rounds
    metas = metas_of(suite, "slurmbox")
    assert len(metas) == 2 * rounds and all(not m["failed_cases"] for m in metas)
    (path,) = (suite / "raw-runs" / "slurmbox" / "batches").glob("*.json")
    record = json.loads(path.read_text())
    assert record["state"] == "finished" and record["fleet"]["address"] == "the Slurm partition (default)"
    blocks = record["fleet"]["blocks"]
    host = socket.gethostname().split(".")[0]
    # each job bound by Slurm to one slot's CPU: the block's runs on it alone
    assert len(blocks) == rounds and {b["node"] for b in blocks} == {host}
    assert all(len(b["cpus"]) == 1 for b in blocks)
    for m in metas:
        assert m["duet"]["cpus"] == m["fleet"]["cpus"]
    r = run_mbaphases(suite, "report", "--machine", "slurmbox", "--min-runs", "1", "--out", str(tmp_path / "rep"),
                      env={"MBAPHASES_PROFILE": "tiny"})
    assert classes_of(r, tmp_path / "rep")["candidates"]


def test_ctrl_c_at_the_driver_cancels_the_jobs_and_leaves_no_process(slurm, suite):
    folder, env = slurm
    cmd, env = driver(suite, env, "slurmstop", "--runs", "6")
    before = set((suite / ".asv" / "duet").glob("*/r*"))
    proc = subprocess.Popen(cmd, cwd=suite, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    mid = lambda: len([d for d in (suite / ".asv" / "duet").glob("*/r*") if d not in before
                       and (d / "case1.0").exists()]) >= 2
    assert _until(mid, 300), "two blocks mid-way"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    queued = lambda: subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=env).stdout.strip() == ""
    assert _until(queued, 60), "every job cancelled"
    assert _until(lambda: not _suite_processes(suite), 60), _suite_processes(suite)
    assert len(metas_of(suite, "slurmstop")) < 12


@pytest.mark.parametrize("args, needle", [
    (["--fleet", "slurm", "--fleet-files", "shipped"], "a Slurm cluster's nodes share its file system"),
    (["--fleet", "slurm:no-such-partition"], "--fleet slurm:no-such-partition: "),
])
def test_what_a_slurm_fleet_cannot_be_is_one_error_line(slurm, suite, args, needle):
    folder, env = slurm
    p = run_mbaphases(suite, "run", "--design", "turns", "--profile", "tiny", "--machine", "slurmbad", *args,
                      env={"SLURM_CONF": env["SLURM_CONF"]})
    assert p.returncode == 2 and p.stderr.count("error:") == 1 and needle in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and not (suite / "raw-runs" / "slurmbad").exists()
