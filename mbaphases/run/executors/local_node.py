"""This machine as a fleet of one node: each pair block (mbaphases.run.executors.blocks) runs in a
process of its own, in a staging store of its own, on the first free slot, exactly as on a fleet's
node; the driver gathers its files into the machine's store as they end. So pairs that share a side
run at once wherever slots are free, and a block starts as soon as a slot frees.

A block's process gets the batch's CPUs and takes its slot itself (blocks.slot_of); the driver starts
no more blocks than there are slots. Each block's folder (its spec, its result, and its staging store,
made under it; in the suite's ``.asv/blocks``) belongs to the driver, which removes it when the block
has ended, however it ended.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mbaphases import processes
from mbaphases.run.executors import blocks

NODE = "local"
CANCEL_WAIT_S = 60  # a cancelled block ends its processes in seconds (processes.GRACE_S each)


@dataclass(eq=False)
class LocalBlock:
    """A block's process and its folder."""
    proc: subprocess.Popen
    folder: Path

    @property
    def result_file(self) -> Path:
        return self.folder / "result.pickle"


@dataclass
class LocalBackend:
    """Blocks as processes on this machine's slots (the batch's CPUs cut by the profile's size)."""
    cpus: list[int]
    slot_count: int
    folders: Path  # where the blocks' folders are made
    env: dict = field(default_factory=lambda: dict(os.environ))  # the batch's: its processes carry its folders
    poll_s: float = 0.2
    where = "this machine"
    one_machine = True  # stored under the batch's own machine name (one host is one hardware class)

    @property
    def nodes(self) -> dict:
        return {NODE: self.slot_count}

    def put(self, data: bytes):
        return data

    def submit(self, spec: dict, bundle, node: str | None = None) -> LocalBlock:
        self.folders.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{spec['name']}-", dir=self.folders))
        # the block's staging store inside its folder: removed with it
        (folder / "spec.pickle").write_bytes(pickle.dumps(({**spec, "staging_in": str(folder)}, bundle)))
        proc = processes.start([sys.executable, "-m", "mbaphases.run.executors.local_node", str(folder)],
                               Path(__file__).resolve().parents[3], self.env, cpus=self.cpus)
        return LocalBlock(proc, folder)

    def wait(self, handles: list[LocalBlock]) -> LocalBlock:
        while True:
            for h in handles:
                if h.proc.poll() is not None:
                    return h
            time.sleep(self.poll_s)

    def result(self, handle: LocalBlock) -> dict:
        try:
            code = handle.proc.wait()
            if code != 0 or not handle.result_file.is_file():
                raise blocks.BlockLost(f"its process exited {code} without a result")
            return pickle.loads(handle.result_file.read_bytes())
        finally:
            _remove(handle)

    def cancel(self, handles: list[LocalBlock]) -> None:
        """Every block told to end (it ends its runs and removes its staging store), waited for, then
        whatever is left of it ended and its folder removed."""
        for h in handles:
            if h.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(h.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + CANCEL_WAIT_S
        for h in handles:
            with contextlib.suppress(subprocess.TimeoutExpired):
                h.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            _remove(h)


def _remove(handle: LocalBlock) -> None:
    processes.end_all([handle.proc])
    shutil.rmtree(handle.folder, ignore_errors=True)


def main(folder: str) -> None:
    """A block's process: its spec in, its result out; SIGTERM ends its runs as an interrupt does."""
    spec, bundle = pickle.loads((Path(folder) / "spec.pickle").read_bytes())
    with processes.terminate_as_interrupt():
        try:
            result = blocks.run_block(spec, bundle, NODE, out=sys.stdout)
        except KeyboardInterrupt:
            sys.exit(130)
    tmp = Path(folder) / "result.pickle.tmp"
    tmp.write_bytes(pickle.dumps(result))
    tmp.replace(Path(folder) / "result.pickle")


if __name__ == "__main__":
    main(sys.argv[1])
