"""A formal command owns every process it starts.

Each child (asv, and through it the forkserver, the benchmark processes, py-spy and the entries)
starts in a session of its own. asv puts each of its own children in a new process group, so a
process group is not the tree; the session is (no descendant here starts a session of its own).
Whatever way the command ends (the child's exit, Ctrl-C, SIGTERM, SIGHUP, an error), every
process still in that session is ended: TERM, then KILL after a grace period. A next formal run
never measures beside an orphan of this one.

That includes the command's own sudden end (SIGKILL, an out-of-memory kill), where no handler
runs: each session has a watcher outside it, holding the read end of a pipe whose write end only
the command holds; the kernel closes it however the command ends, and the watcher then ends the
session (``python -m mbaphases.processes``).
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import stat as file_stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from mbaphases.staging import DEFERRED, held_signals

GRACE_S = 5.0


def session_members(sid: int) -> list[int]:
    """Every live process of session ``sid`` (read from /proc: field 6 of each stat line)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # ended while listed
        fields = text[text.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(stat.parent.name))
    return members


def with_env(entry: str, prefix: bool = False) -> list[int]:
    """Every live process whose environment holds ``entry`` (``NAME=value``; ``prefix``: a value that
    begins so): a run's processes carry its folders there, whatever session or process group they
    ended up in."""
    needle = entry.encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            items = environ.read_bytes().split(b"\0")
            if not (any(x.startswith(needle) for x in items) if prefix else needle in items):
                continue
            if (environ.parent / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":  # a zombie has ended
                found.append(int(environ.parent.name))
        except (OSError, IndexError):
            continue  # ended while listed, or another user's
    return found


def end_session(sid: int, grace_s: float = GRACE_S) -> list[int]:
    """TERM every process of the session, KILL what is left after ``grace_s``; returns the pids
    that had to be ended."""
    found = session_members(sid)
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)  # a paired side held at its barrier (stopped) takes the TERM now
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and session_members(sid):
        time.sleep(0.1)
    for pid in session_members(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return found


def start(cmd: list[str], cwd, env: dict, cpus: list[int] | None = None, into: list | None = None) -> subprocess.Popen:
    """``cmd`` in a session of its own (on ``cpus`` alone when given: its children inherit them), with
    its watcher, appended to ``into`` (the caller's list of what to end). An interrupt (Ctrl-C,
    SIGTERM, SIGHUP) arriving meanwhile waits until the process is watched and in that list: raised
    between the start and the list, it would leave a run going that nothing ends."""
    def takes_signals() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, DEFERRED)  # the new process takes its signals again

    def child() -> None:
        takes_signals()
        if cpus is not None:
            os.sched_setaffinity(0, set(cpus))

    with held_signals():
        # the watcher first: the session is watched from the moment it exists
        watcher = subprocess.Popen([sys.executable, "-m", "mbaphases.processes"], stdin=subprocess.PIPE,
                                   start_new_session=True, cwd=Path(__file__).resolve().parents[1],
                                   preexec_fn=takes_signals)  # the watcher only waits: on no run's CPU
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, start_new_session=True, preexec_fn=child)
        except BaseException:
            watcher.stdin.close()
            watcher.wait()
            raise
        watcher.stdin.write(f"{proc.pid}\n".encode())
        watcher.stdin.flush()
        proc.watcher = watcher
        if into is not None:
            into.append(proc)
    return proc


def run(cmd: list[str], cwd, env: dict) -> int:
    """``cmd`` to its end; then nothing of its session is left, on every exit path."""
    started: list[subprocess.Popen] = []
    try:
        start(cmd, cwd, env, into=started)
        return started[0].wait()
    finally:
        end_all(started)


def wait_all(procs: list[subprocess.Popen]) -> list[int]:
    """Wait for every process started by :func:`start`; their sessions are ended afterwards, and
    at once if the wait is interrupted."""
    try:
        return [p.wait() for p in procs]
    finally:
        end_all(procs)


def end_all(procs: list[subprocess.Popen]) -> None:
    """End every process started by :func:`start` and whatever is left of its session, now (a
    caller interrupted while it watched them: never wait for them to finish)."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGTERM)
        end_session(p.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=GRACE_S)
        watcher = getattr(p, "watcher", None)
        if watcher is not None:  # its session is ended: it finds nothing left and exits
            watcher.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                watcher.wait(timeout=GRACE_S)


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, read as Ctrl-C: the same path keeps the runs and ends the children."""


@contextlib.contextmanager
def terminate_as_interrupt():
    """Inside: SIGTERM and SIGHUP raise :class:`Interrupted` (a KeyboardInterrupt) instead of ending
    the process where it stands, so the children are ended and the batch recorded first."""
    def raise_interrupted(signum, _frame):
        raise Interrupted(signal.Signals(signum).name)

    previous = {s: signal.signal(s, raise_interrupted) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def watch() -> None:
    """The watcher: reads the session's id, then waits for the end of its pipe (the command's end,
    however it came) and ends whatever of the session is left."""
    line = sys.stdin.buffer.readline()
    sys.stdin.buffer.read()
    if line.strip():
        end_session(int(line))



RELAY_JOIN_S = 10.0  # at the command's end, the most the relay may take to pass on what is left


@contextlib.contextmanager
def relayed_stdout():
    """Where stdout is a pipe, every write of the command and of its children (asv, the entries)
    goes through a relay thread, so that a reader which stops early (``| head``) ends the copying,
    never a run: asv writing into a closed pipe would fail its runs. The rest of the output is
    dropped (said once on stderr) and the command goes on to its own end and exit status."""
    try:
        piped = file_stat.S_ISFIFO(os.fstat(1).st_mode)
    except OSError:
        piped = False
    if not piped:
        yield
        return
    sys.stdout.flush()
    reader = os.dup(1)
    r, w = os.pipe()
    os.dup2(w, 1)
    os.close(w)

    ended = threading.Event()

    def relay() -> None:
        open_ = True
        while True:
            # once the command has ended, what is left in the pipe is passed on and the relay stops
            # (a process the command did not end may still hold the pipe: no waiting for its end)
            if not select.select([r], [], [], 0.1)[0]:
                if ended.is_set():
                    break
                continue
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            view = memoryview(chunk)
            while open_ and view:
                try:
                    view = view[os.write(reader, view):]
                except OSError:  # EPIPE: the reader is gone
                    open_ = False
                    with contextlib.suppress(OSError):
                        os.write(2, b"the output's reader closed it: the rest of the output is dropped; the command "
                                    b"goes on to its end (its files and exit status as usual)\n")
        os.close(r)

    thread = threading.Thread(target=relay, name="stdout-relay", daemon=True)
    # the relay starts with the interrupts blocked (a thread inherits its creator's mask): a signal that
    # waited while the process was stopped goes to whichever thread runs first after SIGCONT, and one
    # the relay took would leave the main thread in its blocking call, its handler not yet run
    with held_signals():
        thread.start()
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(reader, 1)  # the command's own write end of the relay's pipe closes here
        ended.set()
        thread.join(RELAY_JOIN_S)
        os.close(reader)


if __name__ == "__main__":
    watch()
