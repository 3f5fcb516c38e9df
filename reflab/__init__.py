"""Reference target: robot envs with a direct and a manager-based runtime,
measured by the field's off-policy collector benchmark entry."""
import os
from pathlib import Path

__version__ = "0.1.0"

# Torch's OpenMP workers spin after each parallel region and take the cores
# the physics threads need next (measured: go2 at 1024 envs, 2 cores, +45%
# collector throughput with PASSIVE). Read once, before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

PACKAGE_DIR = Path(__file__).resolve().parent
ASSETS_DIR = PACKAGE_DIR / "assets"
# A target repository keeps its owner configs at its root (conf/); its entry
# script points here through REFLAB_CONF_DIR.
CONF_DIR = Path(os.environ.get("REFLAB_CONF_DIR") or PACKAGE_DIR / "conf")
# The active window the field's entries measured: "standard" (env_step + replay +
# bookkeeping) or, as its oldest entry did, "with-action-select" (also the step's
# action selection). Only a target's entry sets it; the JSON's definition says which.
ACTIVE_WINDOW = os.environ.get("REFLAB_ACTIVE_WINDOW", "standard")
