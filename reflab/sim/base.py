"""The backend interface both runtimes read from.

Every backend keeps the same float64 arrays, in MuJoCo's conventions
(wxyz quaternions, qpos = [root pos | root quat | joints]), refreshed once per
control step. Runtimes read these arrays and never talk to an engine directly,
so engine differences live here and nowhere else.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

# A state this far from home is treated as diverged (exploded), like NaN.
DIVERGED_QVEL = 1.0e3
DIVERGED_QPOS = 1.0e2


@dataclass(frozen=True)
class ModelLayout:
    """Sizes and named slices of one MJCF model, read once with MuJoCo's parser."""

    nq: int
    nv: int
    nu: int
    joint_names: tuple[str, ...]
    sensor_slices: dict[str, slice]
    quat_sensor_slices: tuple[slice, ...]
    nsensordata: int
    joint_range: np.ndarray  # (nj, 2)
    ctrl_range: np.ndarray  # (nu, 2)
    actuator_kp: np.ndarray  # (nu,)
    actuator_kv: np.ndarray  # (nu,)
    body_mass: float

    @classmethod
    def from_mjcf(cls, path: Path) -> "ModelLayout":
        model = mujoco.MjModel.from_xml_path(str(path))
        slices, quats = {}, []
        for i in range(model.nsensor):
            adr, dim = int(model.sensor_adr[i]), int(model.sensor_dim[i])
            sl = slice(adr, adr + dim)
            slices[model.sensor(i).name] = sl
            if model.sensor_type[i] == mujoco.mjtSensor.mjSENS_FRAMEQUAT:
                quats.append(sl)
        joint_ids = range(1, model.njnt)  # joint 0 is the free root joint
        return cls(
            nq=model.nq,
            nv=model.nv,
            nu=model.nu,
            joint_names=tuple(model.joint(j).name for j in joint_ids),
            sensor_slices=slices,
            quat_sensor_slices=tuple(quats),
            nsensordata=model.nsensordata,
            joint_range=np.array([model.jnt_range[j] for j in joint_ids]),
            ctrl_range=model.actuator_ctrlrange.copy(),
            actuator_kp=model.actuator_gainprm[:, 0].copy(),
            actuator_kv=-model.actuator_biasprm[:, 2].copy(),
            body_mass=float(model.body_subtreemass[1]),
        )


class Backend:
    """Batched physics of one robot model.

    Arrays (float64, rows = envs): ``qpos (N, nq)``, ``qvel (N, nv)``,
    ``sensordata (N, nsensordata)``. Views: ``root_pos``, ``root_quat`` (wxyz),
    ``joint_pos``, ``joint_vel``. ``sensor(name)`` returns a view by name.
    """

    name = "base"

    def __init__(self, model_path: Path, num_envs: int, nthread: int):
        self.model_path = Path(model_path)
        self.layout = ModelLayout.from_mjcf(self.model_path)
        self.num_envs = int(num_envs)
        self.nthread = int(nthread)
        lay = self.layout
        self.qpos = np.zeros((num_envs, lay.nq))
        self.qvel = np.zeros((num_envs, lay.nv))
        self.sensordata = np.zeros((num_envs, lay.nsensordata))
        self.physics_ns = 0  # engine time of the last step() call
        self.diverged_count = 0  # envs reset because their state blew up, since construction
        self.home_qpos = np.zeros(lay.nq)
        self.home_qpos[3] = 1.0

    # views, valid for the backend's lifetime
    @property
    def root_pos(self) -> np.ndarray:
        return self.qpos[:, 0:3]

    @property
    def root_quat(self) -> np.ndarray:
        return self.qpos[:, 3:7]

    @property
    def joint_pos(self) -> np.ndarray:
        return self.qpos[:, 7:]

    @property
    def joint_vel(self) -> np.ndarray:
        return self.qvel[:, 6:]

    def sensor(self, name: str) -> np.ndarray:
        return self.sensordata[:, self.layout.sensor_slices[name]]

    def step(self, ctrl: np.ndarray, substeps: int) -> np.ndarray:
        """Hold ``ctrl (N, nu)`` over ``substeps`` physics steps in one dispatch,
        refresh the arrays, and return the ids of envs that diverged (already
        put back at ``home_qpos``)."""
        t0 = time.perf_counter_ns()
        self._engine_step(ctrl, substeps)
        self.physics_ns = time.perf_counter_ns() - t0
        self._read_all()
        return self._reset_diverged()

    def step_each_substep(self, ctrl: np.ndarray, substeps: int, before_substep) -> np.ndarray:
        """The first manager-based version's stepping: ``before_substep()`` (which
        rewrites ``ctrl``) and one engine dispatch per physics substep; the
        arrays are refreshed once at the end, so the extra cost is engine time."""
        physics_ns, engine_gave_up = 0, np.zeros(self.num_envs, dtype=bool)
        for _ in range(substeps):
            before_substep()
            t0 = time.perf_counter_ns()
            self._engine_step(ctrl, 1)
            physics_ns += time.perf_counter_ns() - t0
            engine_gave_up |= self._engine_diverged()
        self.physics_ns = physics_ns
        self._read_all()
        return self._reset_diverged(engine_gave_up)

    def read_fresh(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Read the engine's current state again: new ``(qpos, qvel, sensordata)`` arrays."""
        self._read_all()
        return self.qpos.copy(), self.qvel.copy(), self.sensordata.copy()

    def reset(self, env_ids: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Set ``qpos (k, nq)``, ``qvel (k, nv)`` for ``env_ids`` and refresh their rows."""
        if len(env_ids) == 0:
            return
        self._engine_reset(env_ids, qpos, qvel)

    def _reset_diverged(self, engine_gave_up: np.ndarray | None = None) -> np.ndarray:
        bad = self._engine_diverged() if engine_gave_up is None else engine_gave_up
        bad |= ~np.isfinite(self.qpos).all(axis=1)
        bad |= ~np.isfinite(self.qvel).all(axis=1)
        bad |= np.abs(self.qvel).max(axis=1) > DIVERGED_QVEL
        bad |= np.abs(self.qpos[:, 0:3]).max(axis=1) > DIVERGED_QPOS
        ids = np.flatnonzero(bad)
        if len(ids):
            self.diverged_count += len(ids)
            self.reset(ids, np.broadcast_to(self.home_qpos, (len(ids), self.layout.nq)),
                       np.zeros((len(ids), self.layout.nv)))
        return ids

    def close(self) -> None:
        pass

    # engine-specific
    def _engine_diverged(self) -> np.ndarray:
        """Envs the engine itself gave up on during the last step."""
        return np.zeros(self.num_envs, dtype=bool)

    def _engine_step(self, ctrl: np.ndarray, substeps: int) -> None:
        raise NotImplementedError

    def _read_all(self) -> None:
        raise NotImplementedError

    def _engine_reset(self, env_ids, qpos, qvel) -> None:
        raise NotImplementedError
