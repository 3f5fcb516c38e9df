"""Which scheduler runs a fleet's blocks: the one place the fleets differ (mbaphases.run.executors.blocks
is everything they share)."""
from __future__ import annotations

from pathlib import Path

from mbaphases.run import design as design_mod
from mbaphases.run.executors import blocks, ray_fleet, slurm_fleet


def join(fleet: blocks.Fleet, design: design_mod.Design, until_decisive: dict | None, slot_size: int,
         suite_dir: Path, runtime_env: dict | None = None) -> blocks.Backend:
    """The fleet's backend (its nodes and their slots), after what a fleet batch cannot be is refused;
    ``runtime_env``: what Ray sends every node (a shipped batch's suite folder)."""
    blocks.refuse(fleet, design, until_decisive)
    if fleet.scheduler == "slurm":
        return slurm_fleet.connect(fleet.address, fleet.files, slot_size, suite_dir / ".asv" / "slurm-jobs")
    return ray_fleet.connect(fleet.address, fleet.insecure, runtime_env)
