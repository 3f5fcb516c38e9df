"""Two duet sides sharing one CPU in turns (mbaphases run --duet --duet-share-cpu).

The harness puts both entries of a pair on one CPU and tells each, in its environment, where this
file is (MBAPHASES_TURNS_MODULE), the pair's folder (MBAPHASES_TURNS_DIR), its role (0 or 1) and the
turn's length (MBAPHASES_TURN_MS). An entry that takes turns loads this file by its path, so the
side's environment needs nothing of the suite, and calls, per case: ``begin(k)`` before its loop,
``between_steps()`` after each step's last timer, ``end()`` after the loop however it ended. The two
loops then run in turns of about a turn's length, a token passing through two FIFOs between steps
(never inside a timed step), so whatever slows the CPU for longer than a turn slows both sides alike.

The harness marks a side's arrival at its next case (``case<k>.<role>``) and its end
(``ended.<role>``) in the same folder: a side never waits for a partner that is past the case.
Standard library only.
"""
from __future__ import annotations

import os
import select
import time
from pathlib import Path

TURNS_DIR_ENV, TURNS_ROLE_ENV, TURN_MS_ENV = "MBAPHASES_TURNS_DIR", "MBAPHASES_TURNS_ROLE", "MBAPHASES_TURN_MS"
# short enough that a case's measured window holds many turns of each side (a slowdown longer
# than a turn hits both), long enough that a turn holds several of the demo's 3-13 ms steps;
# 25, 100 and 400 ms give the same ratio as the sides alone (docs/log/noise.md, "What a shared CPU
# does to a ratio"), 25 ms the narrowest spread
DEFAULT_TURN_MS = 25.0


class Turns:
    """This side's half of the token protocol. Per case: both arrive at the loop (or the partner
    is past it: its next case began, or its process ended), role 0 goes first, and each side hands
    the token over once its turn has lasted ``turn_ms`` and waits for it back. A side that leaves
    its loop (done, or failed) says so and hands the token over for good."""

    def __init__(self, folder: str, role: int, turn_ms: float):
        self.folder, self.role, self.turn_s = Path(folder), role, turn_ms / 1000.0
        self.other = 1 - role
        self.folder.mkdir(parents=True, exist_ok=True)
        fds = []
        for r in (role, self.other):
            fifo = self.folder / f"turn.{r}"
            try:
                os.mkfifo(fifo)
            except FileExistsError:
                pass
            fds.append(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))  # O_RDWR: opening never waits for the partner
        self.mine, self.theirs = fds
        self.case = -1
        self.alone, self.met = True, False
        self.turn_started = 0.0
        self.handovers = 0
        self.waited_s = 0.0

    def _partner_gone(self) -> bool:
        return any((self.folder / name).exists() for name in
                   (f"out{self.case}.{self.other}", f"case{self.case + 1}.{self.other}", f"ended.{self.other}"))

    def begin(self, case_index: int) -> None:
        """Before the case's loop (its priming step): meet the partner there."""
        self.case, self.handovers, self.waited_s, self.met = case_index, 0, 0.0, False
        (self.folder / f"loop{case_index}.{self.role}").write_text(str(time.time()))
        while not (self.folder / f"loop{case_index}.{self.other}").exists():
            if self._partner_gone():
                self.alone = True
                return
            time.sleep(0.002)
        self.alone = False
        self.met = True
        if self.role == 1:
            self._wait()
        self.turn_started = time.perf_counter()

    def between_steps(self) -> None:
        """After a step: hand the token over once this turn has lasted long enough."""
        if self.alone or time.perf_counter() - self.turn_started < self.turn_s:
            return
        if (self.folder / f"out{self.case}.{self.other}").exists():
            self.alone = True
            return
        os.write(self.theirs, bytes([self.case % 256]))
        self.handovers += 1
        self._wait()
        self.turn_started = time.perf_counter()

    def _wait(self) -> None:
        started = time.perf_counter()
        while True:
            if select.select([self.mine], [], [], 0.05)[0]:
                try:
                    data = os.read(self.mine, 64)
                except BlockingIOError:
                    continue
                if self.case % 256 in data:  # a token of an earlier case is stale
                    break
            elif (self.folder / f"ended.{self.other}").exists():
                self.alone = True
                break
        self.waited_s += time.perf_counter() - started

    def end(self) -> dict:
        """After the case's loop, however it ended: the partner runs on alone, and this side waits
        until the partner's loop has ended too. Whatever this side did next (its summary, the next
        case's build, its exit) would otherwise run on the shared CPU inside the partner's timed
        steps, and always the slower side's: that read the demo's MBA dev 11-19% slow against main
        in turns (docs/log/noise.md, "What a shared CPU does to a ratio")."""
        (self.folder / f"out{self.case}.{self.role}").write_text(str(time.time()))
        os.write(self.theirs, bytes([self.case % 256]))
        started = time.perf_counter()
        while self.met and not self._partner_gone():
            # blocked on the FIFO the partner's own end() writes to, not polling: a wake-up every few
            # ms cost the partner's steps 5% on the demo
            if select.select([self.mine], [], [], 0.05)[0]:
                try:
                    os.read(self.mine, 64)
                except BlockingIOError:
                    pass
        return {"role": self.role, "turn_ms": self.turn_s * 1000.0, "partner_met": self.met,
                "handovers": self.handovers, "waited_s": round(self.waited_s, 3),
                "waited_partner_end_s": round(time.perf_counter() - started, 3)}


def from_env() -> Turns | None:
    """This side's turns as the harness set them, or None (no partner on this CPU)."""
    folder = os.environ.get(TURNS_DIR_ENV)
    if not folder:
        return None
    return Turns(folder, int(os.environ[TURNS_ROLE_ENV]), float(os.environ.get(TURN_MS_ENV, DEFAULT_TURN_MS)))
