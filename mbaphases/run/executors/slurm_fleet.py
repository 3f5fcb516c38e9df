"""A fleet on Slurm: each pair block (mbaphases.run.executors.blocks) is one job of a partition that asks
for one slot's CPUs (``--cpus-per-task`` the profile's size). Slurm's consumable CPUs keep two jobs off
one CPU and bind each job to its own, so a node runs at most as many blocks as it has slots.

submitit submits the jobs (the block's function and arguments pickled into a folder the nodes share)
and reads their results. Whether a job still lives is squeue's answer: submitit's own job states come
from sacct, which a cluster without Slurm's accounting database does not answer. A job that left the
queue without a result (its node lost, the job killed) is a lost block, submitted again (at most
``blocks.RETRIES`` times); nothing of it is kept.

The nodes share the driver's files (a Slurm cluster's shared file system); a shipped batch is Ray's.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from mbaphases.errors import UsageError
from mbaphases.run.executors import blocks

JOB_MINUTES = 24 * 60  # Slurm's time limit of a block's job: a block ends long before; the partition's may be lower
UNUSABLE = ("down", "drain", "drng", "fail", "maint", "unk", "inval", "futr")  # sinfo's short states


def connect(address: str, files: str, slot_size: int, folder: Path) -> SlurmBackend:
    """The partition's nodes and the slots of ``slot_size`` CPUs each offers, refused in one line where
    Slurm's commands or submitit are missing, or no node offers a slot."""
    partition = address.partition(":")[2] or None
    if files == "shipped":
        raise UsageError(f"--fleet {address} with --fleet-files shipped: a Slurm cluster's nodes share its file "
                         "system; --fleet-files shared")
    if shutil.which("sbatch") is None or shutil.which("squeue") is None:
        raise UsageError(f"--fleet {address}: Slurm's commands (sbatch, squeue) are not on this machine's PATH")
    try:
        import submitit  # noqa: F401  (the fleet's extra: present or said so before anything runs)
    except ImportError:
        raise UsageError(f"--fleet {address}: submitit is not installed here; pip install 'mbaphases[fleet]'") from None
    p = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %c %t", *(["-p", partition] if partition else [])],
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        said = (p.stderr.strip() or "failed").splitlines()[-1]
        raise UsageError(f"--fleet {address}: sinfo: {said}; valid: slurm (the default partition) or slurm:PARTITION")
    nodes = {}
    for line in p.stdout.splitlines():
        name, cpus, state = line.split()
        if not state.rstrip("*~#!%$@^-").startswith(UNUSABLE):
            nodes[name] = nodes.get(name, 0) or int(cpus) // slot_size
    nodes = {k: v for k, v in nodes.items() if v}
    if not nodes:
        raise UsageError(f"--fleet {address}: no node of {'partition ' + partition if partition else 'the default partition'} "
                         f"is up with {slot_size} CPU{'s' if slot_size != 1 else ''} for a slot; valid: slurm (the default "
                         "partition) or slurm:PARTITION of a partition with such nodes")
    return SlurmBackend(nodes, f"the Slurm partition {partition or '(default)'}", partition, slot_size, folder)


def run_on_node(spec: dict, bundle_bytes: bytes | None) -> dict:
    """The block, inside its Slurm job on its node."""
    return blocks.run_block(spec, bundle_bytes, os.environ.get("SLURMD_NODENAME") or os.uname().nodename)


@dataclass(eq=False)
class SlurmBlock:
    """A block's handle: the job now running it (another after a lost one), and what to submit again."""
    job: object
    spec: dict
    bundle: object
    node: str | None
    tries: int = 0


@dataclass
class SlurmBackend:
    nodes: dict  # node name -> slots it offers
    where: str
    one_machine = False  # nodes of their own: each hardware class under a machine name of its own
    partition: str | None
    slot_size: int
    folder: Path  # submitit's: the jobs' pickled functions, results and logs (shared by the nodes)
    poll_s: float = 1.0

    def put(self, data: bytes):
        return data  # pickled into each job's arguments

    def _executor(self, node: str | None):
        import submitit
        executor = submitit.SlurmExecutor(folder=str(self.folder), max_num_timeout=0)
        executor.update_parameters(cpus_per_task=self.slot_size, ntasks_per_node=1, nodes=1, time=JOB_MINUTES,
                                   **({"partition": self.partition} if self.partition else {}),
                                   **({"nodelist": node} if node else {}))
        return executor

    def submit(self, spec: dict, bundle, node: str | None = None) -> SlurmBlock:
        return SlurmBlock(self._executor(node).submit(run_on_node, spec, bundle), spec, bundle, node)

    def wait(self, handles: list[SlurmBlock]) -> SlurmBlock:
        """The first block whose job ended; a job that ended without a result is submitted again while
        the block has tries left."""
        while True:
            queued = self._queued([h.job.job_id for h in handles])
            for h in handles:
                if h.job.paths.result_pickle.exists():
                    return h
                if h.job.job_id in queued:
                    continue
                if h.tries >= blocks.RETRIES:
                    return h
                h.tries += 1
                h.job = self._executor(None).submit(run_on_node, h.spec, h.bundle)
            time.sleep(self.poll_s)

    def _queued(self, job_ids: list[str]) -> set[str]:
        p = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)], capture_output=True, text=True,
                           check=False)
        if p.returncode != 0:  # squeue names no job it has forgotten: ask one at a time
            return {j for j in job_ids if subprocess.run(["squeue", "-h", "-o", "%i", "-j", j], capture_output=True,
                                                         text=True, check=False).stdout.strip()}
        return set(p.stdout.split())

    def result(self, handle: SlurmBlock) -> dict:
        if not handle.job.paths.result_pickle.exists():
            raise blocks.BlockLost(f"Slurm job {handle.job.job_id} ended without a result")
        try:
            return handle.job.result()
        except Exception as e:  # the block's own failure, with its last line
            raise blocks.BlockLost(f"Slurm job {handle.job.job_id}: {str(e).strip().splitlines()[-1]}") from None

    def cancel(self, handles: list[SlurmBlock]) -> None:
        for h in handles:
            h.job.cancel(check=False)
