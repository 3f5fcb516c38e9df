"""The pinned A/B parameters (pins.toml), with the active profile resolved."""
from __future__ import annotations

import os
from pathlib import Path

from mbaphases import inputs
from mbaphases.errors import UsageError


def load(path: Path, profile: str | None = None) -> dict:
    path = Path(path)
    pins = inputs.load_pins(path)
    name = profile or os.environ.get("MBAPHASES_PROFILE") or pins["profile"]
    if name not in pins["profiles"]:
        raise UsageError(f"unknown profile {name!r}; valid: {', '.join(pins['profiles'])}")
    pins["active_profile"] = {"name": name, **pins["profiles"][name]}
    pins["path"] = str(path.resolve())
    return pins
