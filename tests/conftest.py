import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pytest_configure(config):
    """Under pytest-xdist (scripts/run_tests.sh: ``-n`` streams) each worker is a one-CPU runner of its
    own, as the field's CI runners are: pinned to one CPU (every run it starts inherits it, and a run
    counts only its own CPUs' load), with its own home (asv rewrites ~/.asv-machine.json as it starts,
    not atomically) and its own formal-run lock. Tests marked two_cpus wait for a run without streams."""
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[int(worker["workerid"].removeprefix("gw")) % len(cpus)]})
        home = Path.home()
        stream_home = Path(tempfile.mkdtemp(prefix=f"mbaphases-stream-{worker['workerid']}-"))
        config.stream_home = stream_home
        # caches, configuration and git's identity stay the user's: only asv's machine file is the stream's
        for var, where in (("XDG_CACHE_HOME", home / ".cache"), ("XDG_CONFIG_HOME", home / ".config"),
                           ("XDG_DATA_HOME", home / ".local" / "share"), ("GIT_CONFIG_GLOBAL", home / ".gitconfig"),
                           ("PYENV_ROOT", home / ".pyenv")):
            if where.exists():
                os.environ.setdefault(var, str(where))
        os.environ["HOME"] = str(stream_home)
        os.environ["MBAPHASES_LOCK"] = str(stream_home / "formal.lock")
    # the physics' threads: at most two, never more than this process's CPUs
    os.environ.setdefault("UNILAB_COLLECTOR_TORCH_THREADS", str(min(2, len(os.sched_getaffinity(0)))))


def pytest_unconfigure(config):
    if getattr(config, "stream_home", None):
        shutil.rmtree(config.stream_home, ignore_errors=True)


def pytest_addoption(parser):
    parser.addoption("--two-cpus-only", action="store_true",
                     help="run only the tests marked two_cpus (after the one-CPU streams, scripts/run_tests.sh)")


# a test's time limit (pytest-timeout): its file's slow seconds (the whole file's length in a one-CPU
# stream) times this factor, at least the floor; past it the test is hung, and fails naming itself
# instead of running into CI's cap
TIMEOUT_FACTOR = 5
TIMEOUT_FLOOR_S = 300


def time_limit(item) -> float:
    slow = item.get_closest_marker("slow")
    return max(TIMEOUT_FLOOR_S, TIMEOUT_FACTOR * (slow.kwargs.get("seconds", 0) if slow is not None else 0))


def pytest_collection_modifyitems(config, items):
    """Every test gets its time limit (one it sets itself stays). A one-CPU stream leaves the tests that
    need two CPUs (pairs across CPUs, a cluster of nodes) to the run after it; --two-cpus-only is that
    run. The streams take the longest files first (the slow marker's seconds): they end together when
    the short files fill the gaps at the end."""
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(time_limit(item)))
    streams = getattr(config, "workerinput", None) is not None
    only = config.getoption("--two-cpus-only")
    if not (streams or only):
        return
    keep, later = [], []
    for item in items:
        (later if (item.get_closest_marker("two_cpus") is not None) != only else keep).append(item)
    if later:
        config.hook.pytest_deselected(items=later)
    seconds = {}  # a file's expected length: its slow marker's seconds (a slow test without: 1 s)
    for item in keep:
        slow = item.get_closest_marker("slow")
        if slow is not None:
            seconds[item.path] = max(seconds.get(item.path, 0), slow.kwargs.get("seconds", 1))
    items[:] = sorted(keep, key=lambda item: -seconds.get(item.path, 0))  # stable: each file's order kept


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def compose(case: str, num_envs: int = 16, overrides=(), seed: int = 0):
    from reflab.bench import compose_case  # noqa: PLC0415 -- reflab is importable only after the sys.path line above

    # not strict: some tests stand for configs edited by hand, which the managers must reject
    cfg = compose_case(case, num_envs, list(overrides), seed, strict=False)
    cfg.sim.nthread = 1
    return cfg
