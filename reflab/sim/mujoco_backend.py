"""MuJoCo through mujoco_uni.BatchEnvPool: one pool dispatch per control step."""
from __future__ import annotations

import mujoco
import numpy as np
from mujoco_uni import BatchEnvPool

from reflab.sim.base import Backend


class MujocoBackend(Backend):
    name = "mujoco"

    def __init__(self, model_path, num_envs: int, nthread: int):
        super().__init__(model_path, num_envs, nthread)
        self.model = mujoco.MjModel.from_xml_path(str(self.model_path))
        self.pool = BatchEnvPool(self.model, nbatch=self.num_envs, nthread=self.nthread)
        data = mujoco.MjData(self.model)
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        self._nstate = mujoco.mj_stateSize(self.model, spec)
        self._state = np.zeros((self.num_envs, self._nstate))
        self._spec_state = np.zeros(self._nstate)
        mujoco.mj_getState(self.model, data, self._spec_state, spec)
        self.home_qpos = self.model.qpos0.copy()
        nq, nv = self.layout.nq, self.layout.nv
        # FULLPHYSICS layout: [time | qpos | qvel | act | ...]
        self._qpos_cols = slice(1, 1 + nq)
        self._qvel_cols = slice(1 + nq, 1 + nq + nv)
        self._state[:] = self._spec_state
        self._sensor_raw = np.zeros((self.num_envs, self.layout.nsensordata))
        self.reset(np.arange(self.num_envs), np.tile(self.home_qpos, (self.num_envs, 1)),
                   np.zeros((self.num_envs, nv)))

    def _engine_step(self, ctrl, substeps):
        self._expected_time = self._state[:, 0] + substeps * self.model.opt.timestep
        self._state, sensordata = self.pool.step(
            self._state, nstep=int(substeps), control=ctrl, return_sensor=True)
        self._sensor_raw = sensordata

    def _engine_diverged(self):
        # On an instability warning MuJoCo resets that env's data and stops its
        # substeps without raising; its clock then lags the others'.
        return np.abs(self._state[:, 0] - self._expected_time) > 0.5 * self.model.opt.timestep

    def _read_all(self):
        np.copyto(self.qpos, self._state[:, self._qpos_cols])
        np.copyto(self.qvel, self._state[:, self._qvel_cols])
        np.copyto(self.sensordata, self._sensor_raw)

    def _engine_reset(self, env_ids, qpos, qvel):
        rows = np.tile(self._spec_state, (len(env_ids), 1))
        rows[:, self._qpos_cols] = qpos
        rows[:, self._qvel_cols] = qvel
        state, sensordata = self.pool.reset(np.asarray(env_ids, dtype=np.int64), rows)
        self._state[env_ids] = state
        self.qpos[env_ids] = state[:, self._qpos_cols]
        self.qvel[env_ids] = state[:, self._qvel_cols]
        self.sensordata[env_ids] = sensordata
        self._sensor_raw[env_ids] = sensordata  # what a later read of the engine state returns

    def close(self):
        self.pool.close()
