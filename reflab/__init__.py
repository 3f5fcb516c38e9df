"""Reference target: robot envs with a direct and a manager-based runtime,
measured by the field's off-policy collector benchmark entry."""
import os
from pathlib import Path

# Torch's OpenMP workers spin after each parallel region and take the cores
# the physics threads need next (measured: go2 at 1024 envs, 2 cores, +45%
# collector throughput with PASSIVE). Read once, before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

PACKAGE_DIR = Path(__file__).resolve().parent
ASSETS_DIR = PACKAGE_DIR / "assets"
# A target repository keeps its owner configs at its root (conf/); its entry
# script points here through REFLAB_CONF_DIR.
CONF_DIR = Path(os.environ.get("REFLAB_CONF_DIR") or PACKAGE_DIR / "conf")
