"""The machine-wide formal-run lock: formal runs never overlap on one machine.

`mbaphases run` and `find` hold it for their whole run and name themselves in the
environment their entry runs inherit (HOLDER_VAR), so those runs count the parent's
hold as theirs; an entry run started another way (plain asv) takes it itself. Standard
library only: the benchmark loads this file by path inside the target's environment.
"""
from __future__ import annotations

import fcntl
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

HOLDER_VAR, WAITED_VAR = "MBAPHASES_LOCK_HOLDER", "MBAPHASES_LOCK_WAITED_S"


def lock_path() -> Path:
    return Path(os.environ.get("MBAPHASES_LOCK", "/tmp/mbaphases-formal-run.lock"))


class LockBusy(Exception):
    def __init__(self, path: Path, holder: str, waited_s: float):
        super().__init__(f"another formal run held {path} for {waited_s:.0f} s ({holder}); formal runs must not overlap")
        self.holder, self.waited_s = holder, waited_s


@contextmanager
def acquire(what: str, timeout_s: float, out=sys.stderr, path: Path | None = None):
    """Hold the lock, naming ``what`` in it. A second holder waits, saying once who holds it,
    up to ``timeout_s`` (then LockBusy). Yields (seconds waited, the holder waited for or None,
    the line naming this hold)."""
    path = path or lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")
    started, holder, said = time.time(), None, False
    try:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                if not said:
                    print(f"waiting for the formal-run lock {path}, held by: {holder}", file=out, flush=True)
                    said = True
                if time.time() - started > timeout_s:
                    raise LockBusy(path, holder, time.time() - started) from None
                time.sleep(1.0)
        fh.seek(0)
        fh.truncate()
        me = f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}: {what}"
        fh.write(me + "\n")
        fh.flush()
        try:
            yield time.time() - started, holder, me
        finally:
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh, fcntl.LOCK_UN)
    finally:
        fh.close()
