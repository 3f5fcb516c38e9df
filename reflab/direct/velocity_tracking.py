"""Velocity-command tracking on flat ground (go2_joystick_flat, g1_walk_flat),
written as one vectorized body: observations, rewards, terminations and resets
computed in place into preallocated buffers."""
from __future__ import annotations

import numpy as np

from reflab.mathutil import projected_gravity, yaw_quat
from reflab.direct.base import DirectEnv

REWARD_TERMS = (
    "track_lin_vel_xy", "track_ang_vel_z", "lin_vel_z_l2", "ang_vel_xy_l2",
    "flat_orientation_l2", "action_rate_l2", "joint_torques_l2", "joint_pos_limits",
    "feet_air_time",
)


class VelocityTrackingEnv(DirectEnv):
    reward_term_names = REWARD_TERMS

    def __init__(self, cfg):
        super().__init__(cfg)
        task, N, nu = cfg.task, self.num_envs, self.action_dim
        lay = self.backend.layout
        self.feet = [lay.sensor_slices[name] for name in task.feet]
        nf = len(self.feet)
        self.kp, self.kv = lay.actuator_kp, lay.actuator_kv
        obs = task.observation
        # policy: lin_vel 3 | ang_vel 3 | gravity 3 | command 3 | joint_pos | joint_vel | last action
        obs_dim = 12 + 3 * nu
        noise_scale = np.concatenate([
            np.full(3, obs.noise_lin_vel), np.full(3, obs.noise_ang_vel), np.full(3, obs.noise_gravity),
            np.zeros(3), np.full(nu, obs.noise_joint_pos), np.full(nu, obs.noise_joint_vel), np.zeros(nu),
        ])
        self._allocate_observations(obs_dim, obs_dim + 1 + 2 * nf if cfg.algo.asymmetric_critic else 0, noise_scale)
        self.commands = np.zeros((N, 3))
        self.command_time_left = np.zeros(N)
        self.air_time = np.zeros((N, nf))
        self.contact = np.zeros((N, nf), dtype=bool)
        self.reset_all()

    def _update_state(self):
        task, b, dt = self.cfg.task, self.backend, self.step_dt
        self.episode_step += 1
        self.command_time_left -= dt
        due = np.flatnonzero(self.command_time_left <= 0.0)
        if len(due):
            self._resample_commands(due)
        projected_gravity(b.root_quat, out=self.gravity_b)
        lin_vel = b.sensor("base_lin_vel")
        ang_vel = b.sensor("base_ang_vel")
        foot_z = np.stack([b.sensordata[:, sl][:, 2] for sl in self.feet], axis=1)
        np.less(foot_z, task.foot_contact_height, out=self.contact)

        rw, terms = task.rewards, self.reward_terms
        err = self.commands[:, :2] - lin_vel[:, :2]
        terms[:, 0] = np.exp(-np.einsum("ij,ij->i", err, err) / rw.track_lin_vel_xy.std ** 2)
        terms[:, 1] = np.exp(-np.square(self.commands[:, 2] - ang_vel[:, 2]) / rw.track_ang_vel_z.std ** 2)
        terms[:, 2] = np.square(lin_vel[:, 2])
        terms[:, 3] = np.einsum("ij,ij->i", ang_vel[:, :2], ang_vel[:, :2])
        terms[:, 4] = np.einsum("ij,ij->i", self.gravity_b[:, :2], self.gravity_b[:, :2])
        da = self.actions - self.last_actions
        terms[:, 5] = np.einsum("ij,ij->i", da, da)
        q, qd = b.joint_pos, b.joint_vel
        torque = self.kp * (self._ctrl - q) - self.kv * qd
        terms[:, 6] = np.einsum("ij,ij->i", torque, torque)
        terms[:, 7] = self._joint_limit_violation(q)
        first_contact = (self.air_time > 0.0) & self.contact
        moving = np.linalg.norm(self.commands[:, :2], axis=1) > rw.feet_air_time.command_threshold
        terms[:, 8] = ((self.air_time - rw.feet_air_time.threshold) * first_contact).sum(axis=1) * moving
        self.air_time += dt
        self.air_time[self.contact] = 0.0
        terms *= self.weights * dt
        np.sum(terms, axis=1, out=self.reward)

        term = task.termination
        np.less(b.root_pos[:, 2], term.min_base_height, out=self.terminated)
        self.terminated |= self.gravity_b[:, 2] > -np.cos(term.max_tilt_rad)
        self.terminated[self._diverged] = True
        np.greater_equal(self.episode_step, self.max_episode_steps, out=self.truncated)

        self._compute_obs(slice(None), self.gravity_b)
        np.copyto(self.last_actions, self.actions)

    def _compute_obs(self, rows, gravity_b):
        b, nu = self.backend, self.action_dim
        o = self.obs_policy
        o[rows, 0:3] = b.sensor("base_lin_vel")[rows]
        o[rows, 3:6] = b.sensor("base_ang_vel")[rows] * self.ang_vel_scale
        o[rows, 6:9] = gravity_b
        o[rows, 9:12] = self.commands[rows]
        o[rows, 12:12 + nu] = b.joint_pos[rows] - self.default_joint_pos
        o[rows, 12 + nu:12 + 2 * nu] = b.joint_vel[rows] * self.joint_vel_scale
        o[rows, 12 + 2 * nu:] = self.actions[rows]
        if self.obs_critic is not None:
            c = self.obs_critic
            c[rows, :self.obs_dim] = o[rows]
            c[rows, self.obs_dim] = b.root_pos[rows, 2]
            nf = len(self.feet)
            for k, sl in enumerate(self.feet):
                c[rows, self.obs_dim + 1 + k] = b.sensordata[rows, sl][:, 2]
            c[rows, self.obs_dim + 1 + nf:] = self.contact[rows]
        self._noise_and_clip(rows)

    def _resample_commands(self, ids):
        c = self.cfg.task.command
        rng = self.rng["command"]
        lo = np.array([c.lin_vel_x[0], c.lin_vel_y[0], c.ang_vel_z[0]])
        hi = np.array([c.lin_vel_x[1], c.lin_vel_y[1], c.ang_vel_z[1]])
        self.commands[ids] = lo + (hi - lo) * rng.random((len(ids), 3))
        self.command_time_left[ids] = c.resampling_time_s

    def _reset_envs(self, ids):
        task, b = self.cfg.task, self.backend
        n, lay = len(ids), b.layout
        qpos = np.tile(b.home_qpos, (n, 1))
        qpos[:, 2] = task.init_height
        qpos[:, 7:] = self.default_joint_pos
        ev = task.events
        if ev.randomize:
            rng = self.rng["events"]
            lo, hi = ev.joint_pos_offset
            qpos[:, 7:] += lo + (hi - lo) * rng.random((n, self.action_dim))
            np.clip(qpos[:, 7:], lay.joint_range[:, 0], lay.joint_range[:, 1], out=qpos[:, 7:])
            lo, hi = ev.base_xy
            qpos[:, 0:2] = lo + (hi - lo) * rng.random((n, 2))
            lo, hi = ev.base_yaw
            qpos[:, 3:7] = yaw_quat(lo + (hi - lo) * rng.random(n))
        b.reset(ids, qpos, np.zeros((n, lay.nv)))
        self._resample_commands(ids)
        self.actions[ids] = 0.0
        self.last_actions[ids] = 0.0
        self.episode_step[ids] = 0
        self.air_time[ids] = 0.0
        self.contact[ids] = False
        grav = projected_gravity(b.root_quat[ids])
        self.gravity_b[ids] = grav
        self._compute_obs(ids, grav)
