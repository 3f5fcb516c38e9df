import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# two physics threads at most: the suite shares a 2-core machine
os.environ.setdefault("UNILAB_COLLECTOR_TORCH_THREADS", "2")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def compose(case: str, num_envs: int = 16, overrides=(), seed: int = 0):
    from reflab.bench import compose_case  # noqa: PLC0415 -- reflab is importable only after the sys.path line above

    # not strict: some tests stand for configs edited by hand, which the managers must reject
    cfg = compose_case(case, num_envs, list(overrides), seed, strict=False)
    cfg.sim.nthread = 1
    return cfg
