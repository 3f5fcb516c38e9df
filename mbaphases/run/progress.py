"""The live line of a formal run on a terminal: round, side, case k of n, elapsed, an ETA."""
from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

from mbaphases import load, staging


class Progress:
    """A live line while a formal run goes: round, side, case k of n, elapsed, an ETA from
    the runs so far. Only on a terminal; the entry's progress reaches it through a file."""

    def __init__(self, path: Path, names: dict[str, str], total_runs: int, raw_dir: Path, started: float, out):
        self.path, self.names, self.total, self.raw_dir, self.started, self.out = path, names, total_runs, raw_dir, started, out
        self.live = hasattr(out, "isatty") and out.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        if self.live:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.live:
            self._thread.join(timeout=5)
            print(file=self.out)

    def line(self) -> str | None:
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        finished = [m for m in load.run_meta(self.raw_dir.parent, self.raw_dir.name, self.started) if m.get("ended")]
        elapsed = time.time() - self.started
        eta = ""
        if finished:
            per_run = elapsed / (len(finished) + 0.5)
            eta = f", ETA {_mmss(per_run * max(0, self.total - len(finished)))}"
        side = self.names.get(state["commit"], state["commit"][:10])
        return (f"run {len(finished) + 1}/{self.total} | {side} | case {state['case_index']}/{state['cases']} "
                f"{state['case']} | elapsed {_mmss(elapsed)}{eta}")

    def _loop(self):
        # the run's signals go to the main thread only, where processes.start can hold them
        signal.pthread_sigmask(signal.SIG_BLOCK, staging.DEFERRED)
        while not self._stop.wait(2.0):
            text = self.line()
            if text:
                print("\r" + text[:150].ljust(150), end="", file=self.out, flush=True)


def _mmss(seconds: float) -> str:
    return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"
