"""The pinned A/B parameters (pins.toml): which profile is active, and what one benchmark
process reads. Standard library only: the benchmark loads this file by path inside the
target's environment; the suite's commands read pins through mbaphases.inputs.load_pins,
which validates them first."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path


class UnknownProfile(ValueError):
    pass


def activate(pins: dict, name: str | None = None) -> dict:
    """``pins`` with ``active_profile``: the named profile, else MBAPHASES_PROFILE's, else the pinned one."""
    name = name or os.environ.get("MBAPHASES_PROFILE") or pins["profile"]
    if name not in pins["profiles"]:
        raise UnknownProfile(f"unknown profile {name!r}; valid: {', '.join(pins['profiles'])}")
    pins["active_profile"] = {"name": name, **pins["profiles"][name]}
    return pins


def for_benchmark(suite_dir: Path) -> dict:
    """What the runner handed to this benchmark process: its pins file (MBAPHASES_PINS), profile
    and cases (MBAPHASES_CASES: some of the pinned ones, e.g. the one a search measures)."""
    path = Path(os.environ.get("MBAPHASES_PINS") or Path(suite_dir) / "pins.toml")
    pins = activate(tomllib.loads(path.read_text()))
    if os.environ.get("MBAPHASES_CASES"):
        pins["cases"] = os.environ["MBAPHASES_CASES"].split(",")
    return pins
