"""MotrixSim batched SceneData. The engine is float32 with xyzw quaternions;
this backend converts to the shared float64 / wxyz arrays."""
from __future__ import annotations

import numpy as np

from reflab.sim.base import Backend

_thread_pool_size: int | None = None


def _init_thread_pool(nthread: int) -> None:
    # motrixsim allows one thread pool per process, created before the first step.
    global _thread_pool_size
    import motrixsim as mx

    if _thread_pool_size is None:
        mx.init_thread_pool(num_threads=max(1, nthread))
        _thread_pool_size = nthread


def _xyzw_to_wxyz(q: np.ndarray) -> np.ndarray:
    return q[..., [3, 0, 1, 2]]


class MotrixBackend(Backend):
    name = "motrix"

    def __init__(self, model_path, num_envs: int, nthread: int):
        super().__init__(model_path, num_envs, nthread)
        import motrixsim as mx
        from motrixsim import query as Q

        self._mx = mx
        _init_thread_pool(self.nthread)
        self.model = mx.load_mjcf_str(self.model_path.read_text())
        lay = self.layout
        if (self.model.num_dof_pos, self.model.num_dof_vel, self.model.num_actuators) != (lay.nq, lay.nv, lay.nu):
            raise RuntimeError(f"motrixsim reads {self.model_path.name} with other sizes than MuJoCo")
        self.data = mx.SceneData(self.model, batch=[self.num_envs])
        names = list(lay.sensor_slices)  # MuJoCo order, selected by name
        self._query = self.model.compile_query(
            {"qpos": Q.DofPosition(), "qvel": Q.DofVelocity(), "sensors": Q.SensorValues(names)}
        ).allocate(self.data)
        self._ctrl32 = np.zeros((self.num_envs, lay.nu), dtype=np.float32)
        self.home_qpos = np.asarray(self.data.dof_pos[0], dtype=np.float64)
        self.home_qpos[3:7] = _xyzw_to_wxyz(self.home_qpos[3:7])
        self.reset(np.arange(self.num_envs), np.tile(self.home_qpos, (self.num_envs, 1)),
                   np.zeros((self.num_envs, lay.nv)))

    def _engine_step(self, ctrl, substeps):
        np.copyto(self._ctrl32, ctrl)
        self.data.actuator_ctrls = self._ctrl32
        self.model.step_n(self.data, int(substeps))

    def _convert_rows(self, rows):
        q = self._query
        self.qpos[rows] = q["qpos"][rows]
        self.qpos[rows, 3:7] = _xyzw_to_wxyz(self.qpos[rows, 3:7])
        self.qvel[rows] = q["qvel"][rows]
        self.sensordata[rows] = q["sensors"][rows]
        for sl in self.layout.quat_sensor_slices:
            self.sensordata[rows, sl] = _xyzw_to_wxyz(self.sensordata[rows, sl])

    def _read_all(self):
        self._query.execute(self.data)
        self._convert_rows(slice(None))

    def _engine_reset(self, env_ids, qpos, qvel):
        env_ids = np.asarray(env_ids, dtype=np.int64)
        qpos32 = np.array(qpos, dtype=np.float32)
        qpos32[:, 3:7] = qpos32[:, [4, 5, 6, 3]]  # wxyz -> xyzw
        view = self.data[self._mx.DisjointIndices(env_ids)]
        view.reset(self.model, dof_pos=qpos32, dof_vel=np.asarray(qvel, dtype=np.float32),
                   forward_kinematic=True)
        self._query.execute(self.data, env_ids=env_ids)
        self._convert_rows(env_ids)
