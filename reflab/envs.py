"""The env factory: the one place that knows every runtime."""
from __future__ import annotations

from omegaconf import DictConfig

from reflab.direct import DIRECT_ENVS
from reflab.manager.env import ManagerBasedEnv
from reflab.runtime import VecEnv

RUNTIMES = ("direct", "mba")
# A repository that migrated its tasks in place has no runtime key: its code decides
DEFAULT_RUNTIME = "direct"


def runtime_of(cfg: DictConfig) -> str:
    return cfg.get("runtime") or DEFAULT_RUNTIME


def make_env(cfg: DictConfig) -> VecEnv:
    runtime = runtime_of(cfg)
    if runtime == "direct":
        return DIRECT_ENVS[cfg.task.name](cfg)
    if runtime == "mba":
        return ManagerBasedEnv(cfg)
    raise ValueError(f"unknown runtime {runtime!r}; valid: {', '.join(RUNTIMES)}")
