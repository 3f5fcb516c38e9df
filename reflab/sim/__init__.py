"""Physics backends behind one interface (see base.Backend)."""
from reflab.sim.base import Backend, ModelLayout

__all__ = ["Backend", "ModelLayout", "BACKENDS", "canonical_backend", "make_backend"]

BACKENDS = ("mujoco", "motrix")
BACKEND_ALIASES = {"motrixsim": "motrix"}


def canonical_backend(name: str) -> str:
    return BACKEND_ALIASES.get(name, name)


def make_backend(name: str, model_path, num_envs: int, nthread: int, seed: int = 0) -> Backend:
    name = canonical_backend(name)
    if name == "mujoco":
        from reflab.sim.mujoco_backend import MujocoBackend

        return MujocoBackend(model_path, num_envs, nthread)
    if name == "motrix":
        from reflab.sim.motrix_backend import MotrixBackend

        return MotrixBackend(model_path, num_envs, nthread)
    raise ValueError(f"unknown sim backend {name!r}; valid: {', '.join(BACKENDS)}")
