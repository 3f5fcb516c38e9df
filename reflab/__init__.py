"""Reference target: robot envs with a direct and a manager-based runtime,
measured by the field's off-policy collector benchmark entry."""
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ASSETS_DIR = PACKAGE_DIR / "assets"
CONF_DIR = PACKAGE_DIR / "conf"
