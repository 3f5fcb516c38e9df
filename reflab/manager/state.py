"""State quantities read once per step and shared by every term.

Many terms need the same getter (gravity in the base frame, foot heights,
body positions): computing them here once, into preallocated arrays, is what
keeps the manager-based runtime from paying for each term's own read.
"""
from __future__ import annotations

import numpy as np

from reflab.mathutil import projected_gravity


class StateCache:
    def __init__(self, env, feet=(), foot_contact_height=0.0, body_sensors=(), anchor_pos_sensor=None,
                 anchor_quat_sensor=None, soft_joint_limit=1.0):
        b = env.backend
        lay = b.layout
        N = env.num_envs
        self.backend = b
        self._foot = [lay.sensor_slices[n] for n in feet]
        self._bodies = [lay.sensor_slices[n] for n in body_sensors]
        self._anchor_pos = lay.sensor_slices[anchor_pos_sensor] if anchor_pos_sensor else None
        self._anchor_quat = lay.sensor_slices[anchor_quat_sensor] if anchor_quat_sensor else None
        self.foot_contact_height = float(foot_contact_height)
        mid = lay.joint_range.mean(axis=1)
        half = 0.5 * (lay.joint_range[:, 1] - lay.joint_range[:, 0]) * float(soft_joint_limit)
        self.soft_joint_lo, self.soft_joint_hi = mid - half, mid + half
        # views of the backend's arrays: no copy
        self.root_pos, self.root_quat = b.root_pos, b.root_quat
        self.joint_pos, self.joint_vel = b.joint_pos, b.joint_vel
        self.lin_vel_b, self.ang_vel_b = b.sensor("base_lin_vel"), b.sensor("base_ang_vel")
        self.anchor_pos = b.sensordata[:, self._anchor_pos] if self._anchor_pos else None
        self.anchor_quat = b.sensordata[:, self._anchor_quat] if self._anchor_quat else None
        # derived, computed once per step
        self.gravity_b = np.zeros((N, 3))
        nf = len(self._foot)
        self.foot_z = np.zeros((N, nf))
        self.contact = np.zeros((N, nf), dtype=bool)
        self.first_contact = np.zeros((N, nf), dtype=bool)
        self.air_time = np.zeros((N, nf))
        self.body_pos = np.zeros((N, len(self._bodies), 3))

    def refresh(self, rows) -> None:
        sd = self.backend.sensordata
        if isinstance(rows, slice):
            projected_gravity(self.root_quat, out=self.gravity_b)
        else:
            self.gravity_b[rows] = projected_gravity(self.root_quat[rows])
        for k, sl in enumerate(self._foot):
            self.foot_z[rows, k] = sd[rows, sl][:, 2]
        for k, sl in enumerate(self._bodies):
            self.body_pos[rows, k] = sd[rows, sl]

    def reread(self) -> None:
        """Read the engine state again and derive everything from it, for every
        env: what each term paid in the first version (``dev_costs.PER_TERM_STATE``).
        Its getters (base orientation, base velocities, joints, foot heights, body
        positions) each read the engine on their own."""
        read = self.backend.read_fresh
        projected_gravity(read()[0][:, 3:7], out=self.gravity_b)
        # base velocities and joints: the cache's views of the backend's arrays, which a read refreshes
        read()
        read()
        if self._foot:
            sensordata = read()[2]
            for k, sl in enumerate(self._foot):
                self.foot_z[:, k] = sensordata[:, sl][:, 2]
        if self._bodies:
            sensordata = read()[2]
            for k, sl in enumerate(self._bodies):
                self.body_pos[:, k] = sensordata[:, sl]

    def update_contacts(self) -> None:
        """Per step (all envs): contact and first contact against the air time so far."""
        np.less(self.foot_z, self.foot_contact_height, out=self.contact)
        np.logical_and(self.air_time > 0.0, self.contact, out=self.first_contact)

    def advance_air_time(self, dt: float) -> None:
        """After the rewards read it."""
        self.air_time += dt
        self.air_time[self.contact] = 0.0

    def reset(self, ids) -> None:
        self.air_time[ids] = 0.0
        self.contact[ids] = False
        self.first_contact[ids] = False
        self.refresh(ids)
