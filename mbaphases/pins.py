"""The pinned A/B parameters (pins.toml)."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from mbaphases.errors import UsageError

PROFILE_KEYS = ("num_envs", "warmup_steps", "measure_steps", "replay_capacity_steps", "torch_threads")


def load(path: Path, profile: str | None = None) -> dict:
    path = Path(path)
    try:
        pins = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"pins file {path} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"pins file {path} is not valid TOML: {e}") from None
    for key in ("profile", "runs", "cases", "baseline", "candidate", "profiles"):
        if key not in pins:
            raise UsageError(f"pins file {path} lacks {key!r}")
    name = profile or os.environ.get("MBAPHASES_PROFILE") or pins["profile"]
    if name not in pins["profiles"]:
        raise UsageError(f"unknown profile {name!r}; valid: {', '.join(pins['profiles'])}")
    prof = pins["profiles"][name]
    for key in PROFILE_KEYS:
        if not isinstance(prof.get(key), int) or prof[key] <= 0:
            raise UsageError(f"pins file {path}: profiles.{name}.{key}={prof.get(key)!r} must be a positive integer")
    pins["active_profile"] = {"name": name, **prof}
    pins["path"] = str(path.resolve())
    return pins
