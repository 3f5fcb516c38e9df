"""The command's process: where stdout is a pipe its output goes through a relay thread, and the
interrupts reach the main thread only (real processes, their threads' signal masks from /proc)."""
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MASKS = """
import os, sys, threading
from mbaphases import processes

def blocked(tid):
    status = open(f"/proc/self/task/{tid}/status").read()
    return int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)

with processes.relayed_stdout():
    (relay,) = [t for t in threading.enumerate() if t.name == "stdout-relay"]
    print(blocked(os.getpid()), blocked(relay.native_id), file=sys.stderr)
"""


def test_the_relay_thread_blocks_the_interrupts_so_the_main_thread_takes_them():
    p = subprocess.run([sys.executable, "-c", MASKS], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    main, relay = map(int, p.stderr.split())
    for interrupt in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        assert relay & (1 << (interrupt - 1)) and not main & (1 << (interrupt - 1)), (interrupt, p.stderr)
