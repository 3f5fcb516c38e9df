"""Outputs appear complete or not at all.

Files are written into a temporary directory beside the destination and moved
into place only once everything was written, so a failure leaves the previous
output as it was and no partial files. Only the files written are replaced;
anything else already in the destination is left alone.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from pathlib import Path

# held while staged files move into place, so an interrupt lands before or after, never between
DEFERRED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


class Stage:
    """One destination's staging directory. Made only through :class:`Stages`, which discards it
    whatever way the writing ends."""

    def __init__(self, final: Path, fresh_subdirs: tuple[str, ...] = ()):
        self.final = Path(final).resolve()
        self.fresh_subdirs = fresh_subdirs  # replaced whole (their old files would mislead)
        self.dir: Path | None = None

    def make(self) -> Path:
        anchor = self.final
        while not anchor.exists():
            anchor = anchor.parent
        self.dir = Path(tempfile.mkdtemp(prefix=".mbaphases-stage-", dir=anchor))
        return self.dir

    def move_into_place(self) -> None:
        for sub in self.fresh_subdirs:
            if (self.dir / sub).is_dir() and (self.final / sub).is_dir():
                shutil.rmtree(self.final / sub)
        for src in sorted(p for p in self.dir.rglob("*") if p.is_file()):
            dest = self.final / src.relative_to(self.dir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dest)

    def discard(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


class Stages:
    """Several destinations written as one: ``with Stages() as st: d = st.add(out) ...`` gives
    staging directories; a clean exit moves every file into place, any exception (an interrupt
    included) discards them all. The signals are held while a staging directory is made and
    while the files move, so an interrupt lands before or after, never between: a directory made
    is always known here, and no staging directory outlives the command."""

    def __init__(self) -> None:
        self.stages: list[Stage] = []

    def add(self, final: Path, fresh_subdirs: tuple[str, ...] = ()) -> Path:
        stage = Stage(final, fresh_subdirs)
        self.stages.append(stage)
        with held_signals():
            return stage.make()

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        with held_signals():
            try:
                if exc_type is None:
                    for stage in self.stages:
                        stage.move_into_place()
            finally:
                for stage in self.stages:
                    stage.discard()


@contextlib.contextmanager
def held_signals():
    held = signal.pthread_sigmask(signal.SIG_BLOCK, DEFERRED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def write_text_atomic(path: Path, text: str) -> None:
    """One file, complete or not at all: written beside its place under a hidden temporary name
    (never matched by the readers' globs) and renamed over it. A crash leaves the previous file,
    or none, and at most a hidden temporary."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
